"""Fault injection for chaos tests and benchmarks: a multi-node Ray cluster on one
machine, and a TCP proxy that can cut a server off.

:class:`LocalRayCluster` starts real Ray nodes with the ``ray start`` CLI — a head and
``nodes - 1`` more joining it over loopback, each its own raylet with its own CPUs —
so a driver that connects to it schedules across nodes exactly as on a real cluster.
Each node runs ``ray start --block`` in its own process group; stopping kills those
groups only (never ``ray stop``, which would take every Ray process on the machine,
including a test session's own cluster).

:class:`TcpProxy` forwards a local port to a server. :meth:`TcpProxy.outage` drops every
open connection and refuses new ones for a while: to the client, the database is
unreachable, as in a network partition or a server restart.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Self

from arena.storage.redis_server import free_port

log = logging.getLogger(__name__)


def _ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


class LocalRayCluster:
    """``nodes`` Ray nodes on this machine (``ray start --head`` plus joiners).

    Args:
        nodes: Number of nodes, the head included.
        cpus_per_node: CPUs each node advertises.
        object_store_mb: Object store of each node.
        startup_timeout_s: Longest wait for all nodes to register.

    Example::

        with LocalRayCluster(nodes=2) as cluster:
            cluster.connect()  # ray.init, then wait for every node
    """

    def __init__(self, nodes: int = 2, cpus_per_node: float = 1, object_store_mb: int = 100,
                 startup_timeout_s: float = 60.0) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.nodes, self.cpus_per_node = nodes, cpus_per_node
        self.object_store_mb, self.startup_timeout_s = object_store_mb, startup_timeout_s
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Short: Ray puts Unix sockets under it (107-byte path limit).
        self.temp_dir = tempfile.mkdtemp(prefix=f"ray{uuid.uuid4().hex[:6]}", dir="/tmp")
        self._procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}

    def _start_node(self, head: bool) -> None:
        args = [_ray_cli(), "start", "--block", f"--num-cpus={self.cpus_per_node:g}",
                f"--object-store-memory={self.object_store_mb * 1024 * 1024}", "--disable-usage-stats",
                "--node-ip-address=127.0.0.1"]
        if head:
            args += ["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.temp_dir}"]
        else:
            args += [f"--address={self.address}"]
        log_path = Path(self.temp_dir) / f"node{len(self._procs)}.log"
        with open(log_path, "wb") as out:
            self._procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                                env=self.env, start_new_session=True))

    def start(self) -> Self:
        """Start the head, then the other nodes once the head's port answers."""
        self._start_node(head=True)
        self._wait_for_port()
        for _ in range(self.nodes - 1):
            self._start_node(head=False)
        return self

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Ray head did not open port {self.port} within "
                           f"{self.startup_timeout_s:g}s; logs in {self.temp_dir}")

    def _check_alive(self) -> None:
        if any(p.poll() is not None for p in self._procs):
            raise RuntimeError(f"a Ray node exited; logs in {self.temp_dir}")

    def connect(self) -> None:
        """``ray.init`` this process to the cluster and wait until every node is alive."""
        import ray

        ray.init(address=self.address, log_to_driver=False)
        deadline = time.monotonic() + self.startup_timeout_s
        while sum(1 for n in ray.nodes() if n["Alive"]) < self.nodes:
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.nodes} Ray nodes did not register within "
                                   f"{self.startup_timeout_s:g}s; logs in {self.temp_dir}")
            time.sleep(0.5)
        log.info("ray cluster of %d nodes at %s", self.nodes, self.address)

    def stop(self) -> None:
        """Stop every node (joiners first), kill what is left of their process groups."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # stray workers of that node
        self._procs = []
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; :meth:`outage` cuts it off for a while.

    One thread with a selector moves the bytes; that is plenty for a database link.
    """

    def __init__(self, target_host: str, target_port: int, port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._stop = threading.Event()
        self._down_until = 0.0
        self._thread = threading.Thread(target=self._loop, name="tcp-proxy", daemon=True)

    def start(self) -> Self:
        self._listen()
        self._thread.start()
        return self

    def _listen(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        sock.setblocking(False)
        self._listener = sock
        self._sel.register(sock, selectors.EVENT_READ, "accept")

    def _close_listener(self) -> None:
        if self._listener is not None:
            self._sel.unregister(self._listener)
            self._listener.close()
            self._listener = None

    def outage(self, seconds: float) -> None:
        """From now on, for ``seconds``: every connection dropped, new ones refused."""
        self._down_until = time.monotonic() + seconds
        log.warning("proxy %d -> %s:%d: outage for %gs", self.port, *self.target, seconds)

    @property
    def down(self) -> bool:
        return time.monotonic() < self._down_until

    def _drop_all(self) -> None:
        for sock in list(self._pairs):
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        peer = self._pairs.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._pairs.pop(s, None)
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.down:
                if self._listener is not None:
                    self._close_listener()
                    self._drop_all()
                time.sleep(0.05)
                continue
            if self._listener is None:
                self._listen()
                log.warning("proxy %d -> %s:%d: back up", self.port, *self.target)
            for key, _ in self._sel.select(timeout=0.1):
                if key.data == "accept":
                    self._accept()
                elif key.fileobj in self._pairs:
                    self._pump(key.fileobj)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pairs[client], self._pairs[upstream] = upstream, client
        self._sel.register(client, selectors.EVENT_READ)
        self._sel.register(upstream, selectors.EVENT_READ)

    def _pump(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
            if data:
                self._pairs[sock].setblocking(True)
                self._pairs[sock].sendall(data)
                self._pairs[sock].setblocking(False)
                return
        except OSError:
            pass
        self._close(sock)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drop_all()
        self._close_listener()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
