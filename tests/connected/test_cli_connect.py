"""``arena connect`` as a user runs it (a subprocess) against a live server, and ArenaClient.connect.

The live server has no background scheduler: the tests play the connected agent's
matches themselves, through the engine, as the ladder would.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import typer

from arena.cli.connect import load_function
from arena.client import ArenaClient, ArenaHTTPError
from tests.client.live import ARENA, REPO_ROOT, popen_taking_ctrl_c, run_cli
from tests.connected.test_live_protocol import ENV, first_legal, play, wait_online
from tests.waiting import wait_for

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

FIRST_LEGAL = textwrap.dedent("""
    import numpy as np

    def helper():
        return 0

    def act(obs, mask):
        return int(np.flatnonzero(mask)[0])
""")


def start_cli(*args: str, home: Path, server: str, token: str) -> subprocess.Popen:
    """``arena ARGS`` running in the background, as :func:`tests.client.live.run_cli` runs it
    (taking Ctrl-C even where the test runner ignores it)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "COLUMNS": "200",
           "PYTHONPATH": str(REPO_ROOT), "ARENA_SERVER": server, "ARENA_TOKEN": token}
    return popen_taking_ctrl_c([*ARENA, *args], cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def poll(condition, what: str, proc: subprocess.Popen | None = None):
    """:func:`wait_for` ``condition``, failing with ``arena connect``'s output if ``proc`` ends first."""
    def output() -> str:
        return "\n".join(proc.communicate()) if proc is not None and proc.poll() is not None else ""
    return wait_for(what, condition, timeout_s=30, every_s=0.05, procs=[proc] if proc else (), explain=output)


@contextmanager
def counting_proxy(upstream: str) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """An HTTP front of ``upstream`` that notes every request (method, path) it passes on."""
    seen: list[tuple[str, str]] = []

    class Forward(http.server.BaseHTTPRequestHandler):
        def _forward(self) -> None:
            seen.append((self.command, self.path))
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            answer = httpx.request(self.command, upstream + self.path, headers=headers, content=body)
            self.send_response(answer.status_code)
            for key in ("Content-Type", "WWW-Authenticate"):
                if key in answer.headers:
                    self.send_header(key, answer.headers[key])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def owned_agents(live, owner: str) -> list[dict]:
    r = httpx.get(f"{live.url}/api/v1/agents", params={"owner": owner})
    assert r.status_code == 200, r.text
    return r.json()["data"]


@sqlite_only
def test_connect_registers_plays_until_max_matches_then_reuses_the_agent_and_stops_on_ctrl_c(live, tmp_path):
    token = live.user("carol")
    (tmp_path / "bot.py").write_text(FIRST_LEGAL)
    broker = live.services.connected_policies().broker
    args = ("connect", "bot.py:act", "--env", ENV, "--name", "cli-first-legal", "--refresh", "0.5")

    proc = start_cli(*args, "--max-matches", "2", home=tmp_path, server=live.url, token=token)
    try:
        agent = poll(lambda: next(iter(owned_agents(live, "carol")), None), "the registration", proc=proc)
        poll(lambda: broker.presence(agent["id"]), "the agent's presence", proc=proc)
        records, _ = play(live, agent, "random", 2)
        assert [r.termination for r in records] == ["normal", "normal"]
        out, err = proc.communicate(timeout=30)  # --max-matches 2: it ends by itself
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0, err
    assert f"registered connected agent {agent['id']} (cli-first-legal, {ENV})" in out
    assert f"done: agent {agent['id']}, 2 matches:" in out
    assert out.count("match ") >= 2 and f"connected to ws://127.0.0.1:{live.url.rsplit(':', 1)[1]}" in out
    poll(lambda: broker.presence(agent["id"]) is None, "the presence to go")

    again = start_cli(*args, home=tmp_path, server=live.url, token=token)
    try:
        poll(lambda: broker.presence(agent["id"]), "the second run's presence", proc=again)
        again.send_signal(signal.SIGINT)
        out, err = again.communicate(timeout=30)
    finally:
        again.kill() if again.poll() is None else None
    assert again.returncode == 0, err
    assert f"reusing connected agent {agent['id']}" in out and f"stopped: agent {agent['id']}, 0 matches" in out
    assert [a["id"] for a in owned_agents(live, "carol")] == [agent["id"]]  # one agent, reused
    poll(lambda: broker.presence(agent["id"]) is None, "the presence to go after Ctrl-C")


@sqlite_only
def test_connect_with_a_bad_token_exits_2_with_the_reason(live, tmp_path):
    (tmp_path / "bot.py").write_text(FIRST_LEGAL)
    with counting_proxy(live.url) as (url, seen):
        bad = run_cli("connect", "bot.py:act", "--env", ENV, "--name", "x", home=tmp_path, server=url,
                      token="stolen-or-typo", timeout=60)
    assert bad.returncode == 2, bad.stdout
    assert "invalid or revoked API token" in bad.stderr and "HTTP 401" in bad.stderr
    assert seen == [("POST", "/api/v1/agents/connected")]  # asked once: a refusal is not retried
    no_env = run_cli("connect", "bot.py:act", "--name", "x", home=tmp_path, server=live.url, token="t")
    assert no_env.returncode == 2 and "--env is required" in no_env.stderr


def test_load_function_names_what_is_wrong(tmp_path, capsys):
    (tmp_path / "bot.py").write_text(FIRST_LEGAL)
    (tmp_path / "broken.py").write_text("raise ValueError('my bug')\n")
    assert load_function(f"{tmp_path}/bot.py:act").__name__ == "act"
    assert load_function(f"{tmp_path}/bot.py").__name__ == "act"  # the default name
    assert load_function(f"{tmp_path}/bot.py", default=None).__name__ == "act"  # Kaggle's rule: the last one
    for target, message in ((f"{tmp_path}/bot.py:play", "has no function 'play' (its functions: helper, act)"),
                            (f"{tmp_path}/missing.py:act", "missing.py is not a file"),
                            (f"{tmp_path}/broken.py:act", "ValueError: my bug")):
        with pytest.raises(typer.Exit) as exited:
            load_function(target)
        assert exited.value.exit_code == 2
        assert message in capsys.readouterr().err.replace("\n", "")


@sqlite_only
def test_arena_client_connect_registers_once_and_plays_in_the_background(live):
    token = live.user("dave")
    with ArenaClient(live.url, token=token) as arena:
        session = arena.connect(first_legal, env=ENV, name="sdk-first-legal", encoding="json", background=True)
        try:
            assert session.created and session.agent["kind"] == "connected"
            wait_online(live, session.agent_id)
            records, _ = play(live, session.agent, "random", 3)
            assert [r.termination for r in records] == ["normal"] * 3
            poll(lambda: session.progress.matches == 3, "the results")
            p = session.progress
            assert p.wins + p.draws + p.losses == 3 and p.forfeits == 0 and p.connected
        finally:
            session.stop()
        assert not session.running and session.error is None
        again = arena.register_connected(ENV, "sdk-first-legal")
        assert again["id"] == session.agent_id and again["created"] is False
        with pytest.raises(ArenaHTTPError) as refused:
            ArenaClient(live.url, token="nope").connect(first_legal, env=ENV, name="x")
        assert refused.value.status == 401


KAGGLE_AGENT = textwrap.dedent("""
    def helper(board):
        return [c for c in range(7) if board[c] == 0]

    def my_agent(observation, configuration):  # Kaggle's signature; the file's last function
        assert observation.mark in (1, 2) and configuration["inarow"] == 4
        return helper(observation.board)[-1]
""")


@sqlite_only
def test_connect_kaggle_connectx_plays_the_files_last_function(live, tmp_path):
    token = live.user("erin")
    (tmp_path / "main.py").write_text(KAGGLE_AGENT)
    broker = live.services.connected_policies().broker
    proc = start_cli("connect", "main.py", "--kaggle", "connectx", "--name", "kaggle-bot", "--max-matches", "2",
                     home=tmp_path, server=live.url, token=token)
    try:
        agent = poll(lambda: next(iter(owned_agents(live, "erin")), None), "the registration", proc=proc)
        assert agent["env"] == ENV
        poll(lambda: broker.presence(agent["id"]), "the agent's presence", proc=proc)
        records, _ = play(live, agent, "random", 2)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill() if proc.poll() is None else None
    assert [r.termination for r in records] == ["normal", "normal"]  # both seats answered legally
    assert proc.returncode == 0, err
    assert "playing as `my_agent`" in out and f"done: agent {agent['id']}, 2 matches" in out
    wrong = run_cli("connect", "main.py", "--kaggle", "connectx", "--env", "tictactoe-v3", "--name", "k",
                    home=tmp_path, server=live.url, token=token)
    assert wrong.returncode == 2 and "plays connect_four-v3, not tictactoe-v3" in wrong.stderr
