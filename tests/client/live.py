"""Helpers of the client tests: a live uvicorn server in a thread (alone, over given settings'
services, or with the background service as ``arena serve`` runs it), and the CLI in a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from arena.core.settings import Settings
from arena.storage.wiring import Services, open_services

ARENA = [sys.executable, "-m", "arena.cli"]
REPO_ROOT = Path(__file__).resolve().parents[2]


def popen_taking_ctrl_c(*args, **kwargs) -> subprocess.Popen:
    """``Popen`` whose command takes Ctrl-C (SIGINT) even where this process ignores it, as a
    runner's background job does: an ignored SIGINT stays ignored across exec, and Python
    then installs no KeyboardInterrupt, so the command would never stop."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        return subprocess.Popen(*args, **kwargs)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 in a daemon thread, until :meth:`stop`."""

    def __init__(self, app, startup_timeout: float = 30.0) -> None:
        # Bind first and hand the socket over: no window where another process takes the port.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"test server on port {self.port} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self._sock.close()


@contextmanager
def serving(settings: Settings) -> Iterator[tuple[str, Services]]:
    """``(url, services)``: a live server over fresh services of ``settings``; both closed after."""
    from arena.api.app import create_app

    with open_services(settings) as services:
        server = LiveServer(create_app(services))
        try:
            yield server.url, services
        finally:
            server.stop()


def run_cli(*args: str, home: Path, server: str | None = None, cwd: Path | None = None,
            token: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m arena.cli ARGS`` as a user runs it, with its own HOME."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "COLUMNS": "200",
           "PYTHONPATH": str(REPO_ROOT)}
    if server:
        env["ARENA_SERVER"] = server
    if token:
        env["ARENA_TOKEN"] = token
    return subprocess.run([*ARENA, *args], check=False, cwd=cwd or home, env=env, capture_output=True,
                          text=True, timeout=timeout)


@dataclass
class Live:
    """A live server with a user ``ada`` (``token``) and the env's builtin agents (``builtin_ids``)."""

    url: str
    token: str
    services: Services
    builtin_ids: dict[str, int]


@contextmanager
def live_arena(tmp_path: Path, db_url: str, redis_url: str, env: str, *, ladder: bool,
               builtins: tuple[str, ...] = ("random", "heuristic")) -> Iterator[Live]:
    """A live server over fresh services, with a user ``ada`` and ``builtins`` on ``env``'s board;
    with ``ladder``, the background service runs ``env``'s ladder too (started after the user
    exists), as ``arena serve`` does."""
    from arena.api.app import create_app
    from arena.client import ArenaClient
    from arena.core.settings import Settings
    from arena.ladder.background import BackgroundService, ServiceConfig
    from arena.ladder.registration import register_builtin_agents
    from arena.runners import InProcessRunner
    from arena.storage.wiring import open_services

    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=db_url,
                        redis_url=redis_url)
    with open_services(settings) as services:
        with services.sessions.begin() as session:
            builtin_ids = register_builtin_agents(session, env, list(builtins))
        runner = InProcessRunner(services.snapshot_cache_factory()())
        config = ServiceConfig(envs=(env,), batch_size=200, max_rate=1e9, idle_sleep_s=0.1)
        service = BackgroundService(services, runner, config)
        server = LiveServer(create_app(services))
        with ArenaClient(server.url, token="") as client:
            token = client.create_user("ada")["token"]
        if ladder:
            service.start()
        try:
            yield Live(server.url, token, services, builtin_ids)
        finally:
            server.stop()
            service.stop()
            runner.close()
