"""The processes of a split ``arena serve`` deployment, for fault benchmarks, and HTTP over them.

:class:`Fleet` starts named ``arena serve`` processes (API-only ``--no-service`` on a
port, or the background service alone ``--no-api``), each in a process group of its own,
so :meth:`Fleet.kill` can SIGKILL one with every child it started, as the OOM killer or a
lost host would; :meth:`Fleet.stop_all` stops what is left (SIGTERM, then SIGKILL).
:class:`Http` spreads requests over the API processes, trying the next one when a
connection is refused, and counts every answer by status.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Self

import httpx

log = logging.getLogger(__name__)

_ROOT = Path(__file__).resolve().parents[2]


class Fleet:
    """Named ``arena serve`` processes, each in a process group of its own: ``service`` runs the
    background service alone (``--no-api``), any other name an API process alone on ``ports[name]``."""

    def __init__(self, tmp: Path, env: dict[str, str], ports: dict[str, int], max_rate: float) -> None:
        self.tmp, self.env, self.ports, self.max_rate = tmp, env, ports, max_rate
        self.procs: dict[str, subprocess.Popen] = {}
        self.kills: Counter[str] = Counter()
        self.lock = threading.Lock()

    def args(self, name: str) -> list[str]:
        common = [sys.executable, "-m", "arena.cli", "serve", "--workers", "0", "--no-demo",
                  "--max-rate", str(self.max_rate)]
        if name == "service":
            return [*common, "--no-api"]
        return [*common, "--no-service", "--port", str(self.ports[name])]

    def start(self, name: str) -> None:
        with open(self.tmp / f"{name}.log", "ab") as out, self.lock:
            self.procs[name] = subprocess.Popen(self.args(name), stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                                cwd=_ROOT, start_new_session=True)

    def up(self, *names: str) -> Self:
        """Start ``names``; as a context manager, every process is stopped on exit."""
        try:
            for name in names:
                self.start(name)
        except BaseException:
            self.stop_all()
            raise
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def kill(self, name: str) -> None:
        """SIGKILL ``name``'s whole process group, as the OOM killer or a lost host would."""
        with self.lock:
            proc = self.procs[name]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            self.kills[name] += 1

    def stop(self, name: str, timeout: float = 30.0) -> None:
        """SIGTERM (a clean stop), then SIGKILL whatever of its group is left."""
        self.stop_all([name], timeout)

    def stop_all(self, names: list[str] | None = None, timeout: float = 30.0) -> None:
        """:meth:`stop` every process (or those ``names``), together: each is sent its SIGTERM
        before any is waited for, so their shutdowns overlap."""
        procs = [(name, self.procs[name]) for name in (list(self.procs) if names is None else names)
                 if name in self.procs]
        for _, proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for name, proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %gs; killed", name, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


class Http:
    """Requests spread over the API processes; a refused connection tries the next one.

    Counts every answer by status; ``refused`` counts connections that no process took
    (the killed one is down). A request whose connection broke after it was sent is
    ``broken``: it may or may not have been accepted, so the checks read the records
    themselves rather than trust what the client saw."""

    def __init__(self, urls: list[str]) -> None:
        self.clients = [httpx.Client(base_url=u, timeout=30) for u in urls]
        self.turn = itertools.count()
        self.status: Counter[int] = Counter()
        self.refused = self.broken = 0
        self.lock = threading.Lock()

    def call(self, method: str, path: str, token: str | None = None, **kwargs) -> httpx.Response | None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        first = next(self.turn)
        for i in range(len(self.clients)):
            client = self.clients[(first + i) % len(self.clients)]
            try:
                response = client.request(method, path, headers=headers, **kwargs)
            except httpx.ConnectError:
                with self.lock:
                    self.refused += 1
                continue
            except httpx.HTTPError:
                with self.lock:
                    self.broken += 1
                return None
            with self.lock:
                self.status[response.status_code] += 1
            return response
        return None

    def close(self) -> None:
        for client in self.clients:
            client.close()
