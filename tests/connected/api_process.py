"""A real ``arena serve --no-service`` in a subprocess, the Redis keys its connected sockets hold,
and a raw WebSocket client that can stop reading (a frozen process, or its network gone).

Shared by the tests of what a connection gives back: on a clean stop of the process
(``test_graceful_shutdown.py``) and when its client stops reading (``test_unresponsive_client.py``).
The ``api_process`` fixture (``conftest.py``) starts the process.
"""

from __future__ import annotations

import base64
import os
import select
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import msgpack
import redis

from arena.connected.broker import ConnectedBroker
from arena.snapshots.keys import RedisKeys
from arena.storage.redis_server import free_port
from tests.client.live import ARENA, REPO_ROOT
from tests.waiting import wait_for

ENV = "connect_four-v3"
KEYS = RedisKeys()  # the service's namespace


@dataclass
class ApiProcess:
    url: str
    port: int
    proc: subprocess.Popen
    log: IO[str]
    store: redis.Redis

    def output(self) -> str:
        """The tail of the process's log."""
        self.log.seek(0)
        return self.log.read()[-4000:]

    def agent(self, user: str, name: str) -> tuple[dict, dict]:
        """A new user and a connected agent of theirs: ``(user, agent)``."""
        made = httpx.post(f"{self.url}/api/v1/users", json={"name": user}).json()
        agent = httpx.post(f"{self.url}/api/v1/agents/connected", json={"env": ENV, "name": name},
                           headers={"Authorization": f"Bearer {made['token']}"}).json()
        return made, agent

    def stop(self) -> None:
        """SIGTERM, and wait for the clean exit (uvicorn waits 10 s at most for open sockets)."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, self.output()


@contextmanager
def api_process_serving(tmp_path: Path, redis_url: str, settings: dict[str, str] | None = None) -> Iterator[ApiProcess]:
    """``arena serve --no-service`` (the API alone) on a free port, up and answering; killed after.
    ``settings``: more ``ARENA_*`` variables for it."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ARENA_DATA_DIR": str(tmp_path / "data"),
           "ARENA_DATABASE_URL": f"sqlite:///{tmp_path / 'arena.db'}", "ARENA_REDIS_URL": redis_url,
           "ARENA_ENVS": ENV, "ARENA_PROBE_AUTO": "false", "ARENA_PROBE_CONCURRENCY": "0", **(settings or {})}
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([*ARENA, "serve", "--no-service", "--workers", "0", "--port", str(port)], env=env,
                            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    api = ApiProcess(f"http://127.0.0.1:{port}", port, proc, log, redis.Redis.from_url(redis_url))

    def up() -> bool:
        return httpx.get(f"{api.url}/api/v1/health", timeout=2).status_code == 200

    try:
        wait_for("the API process", up, timeout_s=120, procs=[proc], explain=api.output, not_yet=(httpx.HTTPError,))
        yield api
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        api.store.close()
        log.close()


def held(api: ApiProcess, user: dict, agent: dict) -> bool:
    """The agent is online and its socket counts against its user and its address."""
    store = api.store
    return bool(store.exists(KEYS.connected_online(agent["id"]))
                and store.zcard(KEYS.connection_slots("user", f"user.{user['id']}")) == 1
                and store.zcard(KEYS.connection_slots("address", "127.0.0.1")) == 1)


def processing(api: ApiProcess, agent: dict) -> list[bytes]:
    """The processing lists of the agent's connections (what they took and did not answer)."""
    return api.store.keys(KEYS.connected_processing(agent["id"], "x")[:-1] + "*")


def still_held(api: ApiProcess, user: dict, agent: dict, requests: list[str]) -> list[str]:
    """What the agent's socket still holds in Redis (nothing once it is all given back): the presence,
    the slots, the processing lists, and ``requests`` not yet back on the agent's queue, in order."""
    store, left = api.store, []
    if store.exists(KEYS.connected_online(agent["id"])):
        left.append("the presence")
    if store.zcard(KEYS.connection_slots("user", f"user.{user['id']}")):
        left.append("the user's slot")
    if store.zcard(KEYS.connection_slots("address", "127.0.0.1")):
        left.append("the address's slot")
    if processing(api, agent):
        left.append("the unanswered requests (a processing list)")
    queue = [msgpack.unpackb(raw, raw=False)["id"] for raw in store.lrange(KEYS.connected_requests(agent["id"]), 0, -1)]
    if queue != requests:
        left.append(f"the agent's queue: {queue}, not {requests} (back on it, in order)")
    return left


def queue_request(api: ApiProcess, agent: dict, padding: bytes = b"") -> str:
    """A decision batch of one row queued as the engine queues it; returns its id."""
    request_id = uuid.uuid4().hex
    frame = msgpack.packb({"type": "request", "id": request_id, "matches": ["m"], "seats": [0], "plies": [0],
                           "padding": padding}, use_bin_type=True)
    ConnectedBroker(api.store, KEYS).send(agent["id"], request_id, frame, 1, time.time() + 600)
    return request_id


def send_buffers_bytes() -> int:
    """The most that the server's socket and a :class:`RawClient`'s (SO_RCVBUF 4 KiB, doubled by the
    kernel) can hold between them; beyond it, the server's transport buffers and pauses."""
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]) + 2 * 4096


def filling_padding() -> bytes:
    """Padding that makes one request larger than the sockets' buffers: once written, the server's
    transport is paused for good while the client does not read."""
    return b"x" * (send_buffers_bytes() + (1 << 20))


class RawClient:
    """A connected agent's client on a raw socket with a 4 KiB receive buffer, speaking msgpack, that
    reads nothing unless asked to (:meth:`read_until_closed`): it can stop reading as a frozen
    process does, or one whose network went half-open."""

    def __init__(self, api: ApiProcess, agent: dict, token: str) -> None:
        self._buffer = b""
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", api.port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /api/v1/agents/{agent['id']}/connect HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.send({"type": "hello", "protocol": 1, "token": token})

    def send(self, message: dict) -> None:
        """``message`` in a client's masked binary frame."""
        payload = msgpack.packb(message)
        mask, n = os.urandom(4), len(payload)
        length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
        self.sock.sendall(bytes([0x82]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def ping(self) -> None:
        self.send({"type": "ping"})

    def welcome(self) -> dict:
        """Read the server's answer to ``hello`` (a client that stops reading stops after it)."""
        frame = self.read_frame()
        assert frame is not None and frame[0] == 0x2, frame
        return msgpack.unpackb(frame[1], raw=False)

    def has_bytes_waiting(self) -> bool:
        """The server wrote something that this client has not read (nothing is read here)."""
        return bool(self._buffer) or bool(select.select([self.sock], [], [], 0)[0])

    def read_frame(self, timeout_s: float = 30.0) -> tuple[int, bytes] | None:
        """The server's next frame, ``(opcode, payload)``, or ``None`` when the socket ended. Fails if
        none comes within ``timeout_s`` (a hang guard)."""
        deadline = time.monotonic() + timeout_s
        head = self._take(2, deadline)
        if head is None:
            return None
        n = head[1] & 0x7F  # a server's frames are not masked
        if n >= 126:
            size = self._take(2 if n == 126 else 8, deadline)
            if size is None:
                return None
            n = int.from_bytes(size, "big")
        payload = self._take(n, deadline)
        return None if payload is None else (head[0] & 0x0F, payload)

    def read_until_closed(self, timeout_s: float = 60.0) -> int | None:
        """Read every frame the server sends until it closes: the code of its close frame, or ``None``
        when the socket ended without one. Fails if it stays open ``timeout_s`` (a hang guard)."""
        deadline = time.monotonic() + timeout_s
        while (frame := self.read_frame(deadline - time.monotonic())) is not None:
            opcode, payload = frame
            if opcode == 0x8:  # close
                return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
        return None

    def _take(self, n: int, deadline: float) -> bytes | None:
        while len(self._buffer) < n:
            left = deadline - time.monotonic()
            assert left > 0, "the server's frame or close did not come (hang guard)"
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        got, self._buffer = self._buffer[:n], self._buffer[n:]
        return got

    def close(self) -> None:
        self.sock.close()
