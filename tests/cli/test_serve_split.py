"""``arena serve --no-service`` and ``--no-api``: the API and the background service in
processes of their own, on one database and Redis (the split that
benchmarks/process_faults.py kills under load).

The real command in subprocesses. An API process alone queues a challenge and nobody
plays it; the background service started beside it plays it to ``done``, served by the
API process, which checks an upload without loading torch. Asking for neither part is refused.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from arena.storage.redis_server import free_port
from tests.api.helpers import checkpoint
from tests.client.live import ARENA, REPO_ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ENV = "tictactoe-v3"


def _env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ARENA_DATA_DIR": str(tmp_path / "data"),
            "ARENA_DATABASE_URL": f"sqlite:///{tmp_path / 'arena.db'}", "ARENA_REDIS_URL": redis_url,
            "ARENA_ENVS": ENV, "ARENA_PROBE_AUTO": "false", "ARENA_PROBE_CONCURRENCY": "0", "COLUMNS": "200"}


def _wait(predicate, what: str, procs: list[subprocess.Popen], timeout: float = 120.0):
    """:func:`wait_for` over HTTP (not listening yet is not yet), failing if a process of ``procs`` exits."""
    return wait_for(what, predicate, timeout_s=timeout, every_s=0.2, procs=procs, not_yet=(httpx.HTTPError,))


def test_an_api_process_alone_queues_and_a_service_process_alone_plays(tmp_path, redis_url):
    env = _env(tmp_path, redis_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1"
    procs = [subprocess.Popen([*ARENA, "serve", "--no-service", "--workers", "0", "--port", str(port)], env=env,
                              cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait(lambda: httpx.get(f"{url}/health", timeout=2).status_code == 200, "the API", procs)
        # --no-service seeds no demo agents either: the board is empty until the service runs
        assert httpx.get(f"{url}/leaderboard", params={"env": ENV}).json()["count"] == 0
        procs.append(subprocess.Popen([*ARENA, "serve", "--no-api", "--workers", "0"], env=env, cwd=REPO_ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        board = _wait(lambda: httpx.get(f"{url}/leaderboard", params={"env": ENV}).json()["data"],
                      "the service's demo agents", procs)
        token = httpx.post(f"{url}/users", json={"name": "ada"}).json()["token"]
        challenge = httpx.post(f"{url}/challenges", headers={"Authorization": f"Bearer {token}"},
                               json={"env": ENV, "agents": [board[0]["agent_id"], board[1]["agent_id"]], "matches": 2})
        assert challenge.status_code == 202, challenge.text
        done = _wait(lambda: httpx.get(f"{url}/challenges/{challenge.json()['id']}").json()["status"] == "done",
                     "the challenge", procs)
        assert done
        # The API process checks a safetensors upload without torch: only the service builds networks
        weights, spec, _ = checkpoint(ENV)
        made = httpx.post(f"{url}/agents", headers={"Authorization": f"Bearer {token}"},
                          files=[("weights", ("agent.safetensors", weights, "application/octet-stream")),
                                 ("spec", (None, spec)), ("env", (None, ENV))])
        assert made.status_code == 201, made.text
        assert "libtorch" not in Path(f"/proc/{procs[0].pid}/maps").read_text()
    finally:
        for proc in procs:
            proc.terminate()
        codes = [proc.wait(60) for proc in procs]
    assert codes == [0, 0]


def test_serving_neither_part_is_refused(tmp_path, redis_url):
    done = subprocess.run([*ARENA, "serve", "--no-api", "--no-service"], check=False,
                          env=_env(tmp_path, redis_url), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "leave nothing to run" in done.stdout + done.stderr
