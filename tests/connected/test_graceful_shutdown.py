"""A clean stop of an API process (SIGTERM, as a deploy restarts it) gives back everything
its connected agents' sockets held in Redis before it exits, not after their TTLs: the
agent's presence, the sockets' slots per user and per address, and the requests its client
had not answered (back on the agent's queue, for its next connection).

The real ``arena serve --no-service`` in a subprocess, clients connected to it, and the Redis
keys read before and after the process exits: the project's own client, thinking about a
request; and a client that stopped reading (frozen, or its network gone), whose socket's
buffers are full and whose last ``ping`` the server cannot answer. uvicorn cancels that
socket's handler when its graceful shutdown times out (10 s), and ends the event loop at once:
before the app's shutdown waited for the releases, the loop's end cancelled them (the presence
and the unanswered requests outlived the process).
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import msgpack
import pytest
import redis

from arena.client.connected.client import AgentClient
from arena.connected.broker import ConnectedBroker
from arena.snapshots.keys import RedisKeys
from arena.storage.redis_server import free_port
from tests.client.live import ARENA, REPO_ROOT, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

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


@pytest.fixture
def api_process(tmp_path: Path, redis_url: str) -> Iterator[ApiProcess]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ARENA_DATA_DIR": str(tmp_path / "data"),
           "ARENA_DATABASE_URL": f"sqlite:///{tmp_path / 'arena.db'}", "ARENA_REDIS_URL": redis_url,
           "ARENA_ENVS": ENV, "ARENA_PROBE_AUTO": "false", "ARENA_PROBE_CONCURRENCY": "0"}
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([*ARENA, "serve", "--no-service", "--workers", "0", "--port", str(port)], env=env,
                            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    api = ApiProcess(f"http://127.0.0.1:{port}", port, proc, log, redis.Redis.from_url(redis_url))

    def up() -> bool:
        assert proc.poll() is None, f"the API process exited\n{api.output()}"
        try:
            return httpx.get(f"{api.url}/api/v1/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for("the API process", up, timeout_s=120)
        yield api
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        api.store.close()
        log.close()


def _held(api: ApiProcess, user: dict, agent: dict) -> bool:
    """The agent is online and its socket counts against its user and its address."""
    store = api.store
    return bool(store.exists(KEYS.connected_online(agent["id"]))
                and store.zcard(KEYS.connection_slots("user", f"user.{user['id']}")) == 1
                and store.zcard(KEYS.connection_slots("address", "127.0.0.1")) == 1)


def _processing(api: ApiProcess, agent: dict) -> list[bytes]:
    """The processing lists of the agent's connections (what they took and did not answer)."""
    return api.store.keys(KEYS.connected_processing(agent["id"], "x")[:-1] + "*")


def _assert_all_given_back(api: ApiProcess, user: dict, agent: dict, requests: list[str]) -> None:
    store, output = api.store, api.output()
    assert not store.exists(KEYS.connected_online(agent["id"])), f"the presence outlived the process\n{output}"
    assert store.zcard(KEYS.connection_slots("user", f"user.{user['id']}")) == 0, \
        f"the user's slot outlived the process\n{output}"
    assert store.zcard(KEYS.connection_slots("address", "127.0.0.1")) == 0, \
        f"the address's slot outlived the process\n{output}"
    assert _processing(api, agent) == [], f"the unanswered requests were not given back\n{output}"
    queue = store.lrange(KEYS.connected_requests(agent["id"]), 0, -1)
    assert [msgpack.unpackb(raw, raw=False)["id"] for raw in queue] == requests, "not back on the queue, in order"


def _queue(api: ApiProcess, agent: dict, padding: bytes = b"") -> str:
    """A decision batch of one row queued as the engine queues it; returns its id."""
    request_id = uuid.uuid4().hex
    frame = msgpack.packb({"type": "request", "id": request_id, "matches": ["m"], "seats": [0], "plies": [0],
                           "padding": padding}, use_bin_type=True)
    ConnectedBroker(api.store, KEYS).send(agent["id"], request_id, frame, 1, time.time() + 600)
    return request_id


def test_sigterm_gives_back_a_clients_presence_slots_and_open_request(api_process):
    api = api_process
    user, agent = api.agent("dee", "thinker")
    thinking, answer = threading.Event(), threading.Event()

    def think(request: dict) -> list[int]:
        """Hold the request until the test is done (it stays open on the server)."""
        thinking.set()
        answer.wait(60)
        return [0]

    client = AgentClient(api.url, user["token"], agent["id"], request_act=think)
    thread = threading.Thread(target=client.run, daemon=True)
    thread.start()
    try:
        wait_for("the agent's presence and its socket's slots", lambda: _held(api, user, agent), timeout_s=30)
        request_id = _queue(api, agent)
        assert thinking.wait(30), f"the client never got the request\n{api.output()}"
        assert len(_processing(api, agent)) == 1
        api.stop()
        _assert_all_given_back(api, user, agent, [request_id])
    finally:
        answer.set()
        client.stop()
        thread.join(10)


def _frame(payload: bytes) -> bytes:
    """A client's masked binary WebSocket frame."""
    mask, n = os.urandom(4), len(payload)
    length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
    return bytes([0x82]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _send_buffers_bytes() -> int:
    """The most that the server's socket and this client's (SO_RCVBUF 4 KiB, doubled by the
    kernel) can hold between them; beyond it, the server's transport buffers and pauses."""
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]) + 2 * 4096


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4/tcp_wmem").exists(), reason="reads Linux's TCP buffer sizes")
def test_sigterm_gives_back_what_a_client_that_stopped_reading_held(api_process):
    api = api_process
    user, agent = api.agent("eve", "frozen")
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", api.port))
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        raw.sendall((f"GET /api/v1/agents/{agent['id']}/connect HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
                     f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += raw.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        raw.sendall(_frame(msgpack.packb({"type": "hello", "protocol": 1, "token": user["token"]})))
        wait_for("the agent's presence and its socket's slots", lambda: _held(api, user, agent), timeout_s=30)
        # From here on the client reads nothing. A request larger than the sockets' buffers fills
        # them: once the pump took the next one, the first was written and the server's transport
        # is paused for good.
        padding = b"x" * (_send_buffers_bytes() + (1 << 20))
        requests = [_queue(api, agent, padding) for _ in range(3)]
        wait_for("the pump to fill the socket's buffers",
                 lambda: sum(api.store.llen(k) for k in _processing(api, agent)) == 2, timeout_s=30)
        raw.sendall(_frame(msgpack.packb({"type": "ping"})))  # its pong waits for room: the reader is stuck
        api.stop()
        _assert_all_given_back(api, user, agent, requests)
    finally:
        raw.close()
