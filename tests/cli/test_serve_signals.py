"""``arena serve`` told twice to stop: the second SIGTERM, coming while it stops (make forwards
the SIGTERM it gets to its child, systemd or an operator may send another), must not end
the stop halfway. It used to raise ``SystemExit`` again inside the cleanup: the embedded
Redis was stopped under the background service's loops, which went on failing every
second ("a round failed") and, with Ray workers, kept the process alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arena.storage.redis_server import free_port
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_sigterm_while_stopping_lets_the_stop_finish(tmp_path: Path) -> None:
    env = {**os.environ, "ARENA_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "ARENA_ENVS": "tictactoe-v3",
           "ARENA_PROBE_AUTO": "false"}
    env.pop("ARENA_DATABASE_URL", None)
    env.pop("ARENA_REDIS_URL", None)
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", "--workers", "0", "--no-demo",
                                 "--port", str(free_port())], env=env, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        def output() -> str:
            return log_path.read_text(errors="replace")

        wait_for("the server to be up", lambda: "Arena is up" in output(), procs=[proc], explain=output)
        proc.send_signal(signal.SIGTERM)
        wait_for("the stop to begin", lambda: "stopping: the background service" in output(), every_s=0.01,
                 procs=[proc], explain=output)
        assert proc.poll() is None, "the stop ended before the second SIGTERM could come while it ran"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, output()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = output()
    assert "SIGTERM while stopping" in text, text[-3000:]
    assert "round failed" not in text, text[-3000:]
    assert text.index("SIGTERM while stopping") < text.index("embedded redis on"), text[-3000:]
