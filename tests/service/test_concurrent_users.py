"""16 users at once against a real ``arena serve`` whose demo ladder is writing.

The real command in a subprocess (in-process match workers, the embedded Redis) on
SQLite and on PostgreSQL (``ARENA_DATABASE_URL`` to a fresh schema). Its one ladder is
the board the users play on (``ARENA_ENVS``: the other boards' demo networks took half
the test to validate before the first match), played flat out (``ARENA_LADDER_SETTLE``
false: a settled board rests, and a resting ladder writes nothing to race with). Once
the ladder is recording, 16 threads each sign up, submit a small MLP, challenge a demo
agent, read the boards and pages, retire their own agent and try to retire someone
else's. No request may fail with a server error (the regression: SQLite's "database is
locked" answered as HTTP 500 while the ladder wrote), the ladder must have recorded
rated matches while the users were at it, and nobody may retire another user's agent.
The service runs with its default abuse limits: 16 sign-ups and ~10 writes per user
stay under every one of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from arena.storage.db import make_engine, models
from arena.storage.redis_server import free_port
from tests.api.helpers import checkpoint
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
ENV = "tictactoe-v3"
USERS = 16
API = "/api/v1"
TLS = httpx.create_ssl_context()
"""One TLS context for every client (plain HTTP here; building one per client cost ~0.1 s each)."""


class Serve:
    """``arena serve`` in a subprocess on ``database_url``, with its log in ``data_dir``."""

    def __init__(self, data_dir: Path, database_url: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}  # default limits; embedded Redis
        env.update({"ARENA_DATA_DIR": str(data_dir), "ARENA_DATABASE_URL": database_url, "ARENA_ENVS": ENV,
                    "ARENA_LADDER_SETTLE": "false", "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
        self.database = make_engine(database_url)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir / "serve.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", "--workers", "0",
                                      "--port", str(self.port)],
                                     env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def rated_matches(self) -> int:
        """Rated matches of ``ENV`` in the database (the ladder's; challenges are unrated)."""
        with self.database.connect() as connection:
            return connection.scalar(select(func.count()).select_from(models.Match)
                                     .where(models.Match.env_id == ENV, models.Match.rated))

    def wait_for_ladder(self, client: httpx.Client, timeout: float = 120.0) -> None:
        """Until the demo ladder has recorded rated matches of ``ENV``."""
        def written() -> bool:
            page = client.get(f"{API}/matches", params={"env": ENV, "limit": 1})
            return page.status_code == 200 and bool(page.json()["data"])
        wait_for("the demo ladder to record a match", written, timeout_s=timeout, every_s=0.2, procs=[self.proc],
                 explain=self.output, not_yet=(httpx.TransportError,))  # a TransportError: not listening yet

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.log.close()
            self.database.dispose()


class User:
    """One user's session: every response it got, and its agent."""

    def __init__(self, url: str, index: int) -> None:
        self.client = httpx.Client(base_url=url, timeout=120.0, verify=TLS)
        self.name = f"user{index:02d}"
        self.index = index
        self.token = ""
        self.agent_id: int | None = None
        self.responses: list[tuple[str, int, str]] = []

    def call(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        response = self.client.request(method, path, headers=headers, **kwargs)
        self.responses.append((f"{method} {path}", response.status_code, response.text[:300]))
        return response

    def sign_up_and_submit(self) -> None:
        created = self.call("POST", f"{API}/users", json={"name": self.name})
        if created.status_code != 201:
            return
        self.token = created.json()["token"]
        weights, spec, _ = checkpoint(ENV, seed=1000 + self.index)
        files = [("weights", ("agent.safetensors", weights, "application/octet-stream")),
                 ("spec", (None, spec)), ("env", (None, ENV)), ("name", (None, self.name))]
        submitted = self.call("POST", f"{API}/agents", files=files)
        if submitted.status_code == 201:
            self.agent_id = submitted.json()["id"]

    def play_and_read(self, demo_agent: int) -> None:
        if self.agent_id is not None:
            self.call("POST", f"{API}/challenges", json={"env": ENV, "agents": [self.agent_id, demo_agent]})
        self.call("GET", f"{API}/leaderboard", params={"env": ENV})
        self.call("GET", f"{API}/matches", params={"env": ENV, "limit": 20})
        self.call("GET", f"{API}/agents", params={"env": ENV})
        self.call("GET", "/")
        self.call("GET", f"/envs/{ENV}")
        if self.agent_id is not None:
            self.call("GET", f"/agents/{self.agent_id}")

    def retire(self, own: bool, other: int | None) -> None:
        if other is not None:
            self.call("DELETE", f"{API}/agents/{other}")
        if own and self.agent_id is not None:
            self.call("DELETE", f"{API}/agents/{self.agent_id}")


@pytest.fixture
def server(tmp_path: Path, db_url: str):
    data_dir = tmp_path / "arena"
    data_dir.mkdir()
    serve = Serve(data_dir, db_url)
    try:
        yield serve
    finally:
        if serve.proc.poll() is None:
            serve.stop()


def test_sixteen_users_while_the_ladder_writes_get_no_server_errors(server: Serve):
    with httpx.Client(base_url=server.url, timeout=60.0, verify=TLS) as observer:
        server.wait_for_ladder(observer)
        demo_agent = next(a["id"] for a in observer.get(f"{API}/agents", params={"env": ENV, "limit": 200})
                          .json()["data"] if a["kind"] == "builtin")
        users = [User(server.url, i) for i in range(USERS)]
        start, submitted, read = (threading.Barrier(USERS) for _ in range(3))

        def life(user: User) -> None:
            start.wait()
            user.sign_up_and_submit()
            submitted.wait()
            user.play_and_read(demo_agent)
            read.wait()
            neighbour = users[(user.index + 1) % USERS]
            # The neighbour's agent (still theirs), then our own, then a demo agent.
            user.retire(own=False, other=neighbour.agent_id)
            user.retire(own=True, other=demo_agent)

        threads = [threading.Thread(target=life, args=(u,), name=u.name) for u in users]
        rated_before = server.rated_matches()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads), "a user hung"
        rated_during = server.rated_matches() - rated_before
        final = {a["id"]: a for a in observer.get(f"{API}/agents", params={"env": ENV, "limit": 200})
                 .json()["data"]}
    for user in users:
        user.client.close()
    assert server.stop() == 0, server.output()

    responses = [r for u in users for r in u.responses]
    errors = [r for r in responses if r[1] >= 500]
    codes = Counter(code for _, code, _ in responses)
    assert not errors, f"{len(errors)} of {len(responses)} responses were server errors ({dict(codes)}): {errors[:5]}"
    assert rated_during > 0, "the ladder recorded nothing while the users were at it"
    lost = {u.name: u.responses for u in users if u.agent_id is None}
    assert not lost, f"users without an agent, and what they were answered: {lost}"
    for user in users:
        foreign = [r for r in user.responses if r[0].startswith("DELETE") and r[0] != f"DELETE {API}/agents/"
                   f"{user.agent_id}"]
        assert [code for _, code, _ in foreign] == [403, 403], foreign
        own = [code for path, code, _ in user.responses if path == f"DELETE {API}/agents/{user.agent_id}"]
        assert own == [200], user.responses
        agent = final[user.agent_id]
        assert agent["owner"] == user.name
        assert agent["status"] == "retired" and agent["status_reason"] == f"retired by {user.name}", agent
    assert final[demo_agent]["status"] != "retired", final[demo_agent]
