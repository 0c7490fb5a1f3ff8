"""What the API keeps between requests: the services plus its caches.

Hot read endpoints (leaderboard and match-history pages) are served as response
bytes from a :class:`PageCache`, straight from the event loop, with no database
round trip, thread hop or response model. A miss runs its read through
:meth:`ApiState.read` (on SQLite, on one reader thread: see there).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from arena.core.errors import TooManyRequests
from arena.core.limits import Limits
from arena.evaluation.fingerprints import FingerprintStore
from arena.read.boards import BoardCache, VersionedCache
from arena.read.frames import FrameCache
from arena.storage.db import repositories as repo
from arena.storage.db.repositories.dialect import dialect_name
from arena.storage.wiring import Services

# A board is refreshed when its marker moves, and reloaded in full after this many seconds.
BOARD_MAX_AGE_S = 300.0
# A payoff matrix (a join over the match log) is recomputed at most this often.
PAYOFF_MIN_AGE_S = 10.0

T = TypeVar("T")
log = logging.getLogger(__name__)


class PageCache:
    """Serialized response bodies by request, least recently used dropped first.

    Each entry is valid until its optional deadline; entries that never change (a
    page rendered from one board, an older page of the match log) have none and stay
    until pushed out by ``max_bytes`` of newer ones. ``clock``: monotonic seconds (a
    test moves its own).
    """

    def __init__(self, max_bytes: int = 32 * 1024 * 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.clock = clock
        self._pages: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # misses are filled from worker threads

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            hit = self._pages.get(key)
            if hit is None:
                return None
            if self.clock() >= hit[0]:
                self._drop(key)
                return None
            self._pages.move_to_end(key)
            return hit[1]

    def put(self, key: Hashable, body: bytes, fresh_s: float = math.inf) -> None:
        """Keeps ``body`` for ``key`` for ``fresh_s`` seconds (not at all if that is 0)."""
        if fresh_s <= 0 or len(body) > self.max_bytes:
            return
        with self._lock:
            if key in self._pages:
                self._drop(key)
            self._pages[key] = (self.clock() + fresh_s, body)
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._pages)))

    def _drop(self, key: Hashable) -> None:
        self._bytes -= len(self._pages.pop(key)[1])

    def clear(self) -> None:
        with self._lock:
            self._pages.clear()
            self._bytes = 0


class AgentIds:
    """``(env, key) -> agent id`` of the agents found so far, the earliest found dropped
    first past ``max_entries``.

    Agents are never deleted and their keys never change, so a found id stays right;
    keys not found are looked up again next time.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._ids: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, session: Session, env_id: str, keys: set[str]) -> dict[str, int]:
        """``{key: id}`` of the existing agents ``keys`` of ``env_id``."""
        with self._lock:
            found = {k: self._ids[(env_id, k)] for k in keys if (env_id, k) in self._ids}
        missing = keys - found.keys()
        if missing:
            loaded = repo.agent_ids_for_keys(session, env_id, missing)
            found.update(loaded)
            with self._lock:
                self._ids.update(((env_id, k), i) for k, i in loaded.items())
                while len(self._ids) > self.max_entries:
                    self._ids.popitem(last=False)
        return found


class DownloadSlots:
    """At most ``count`` long downloads (match-log exports) stream at once in this API process (one:
    a download takes a core for seconds; on a 2-core server the other stays with the API).

    A download past them is refused with 429 before it reads anything. Counted in the
    process, not in Redis: an anonymous GET changes no Redis key. A slot is given back when
    its stream ends, fails, or is dropped unread (a client gone before the first byte).
    """

    RETRY_AFTER_S = 10

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self._free = threading.BoundedSemaphore(count)

    def stream(self, body: Iterator[bytes]) -> Iterator[bytes]:
        """``body`` holding a slot until it ends or is dropped.

        Raises:
            TooManyRequests: Every slot is taken.
        """
        if not self._free.acquire(blocking=False):
            raise TooManyRequests(f"this server streams {self.count} download(s) at a time and is busy; "
                                  f"try again in {self.RETRY_AFTER_S} s", self.RETRY_AFTER_S)
        release = _Once(self._free.release)
        held = _holding(body, release)
        weakref.finalize(held, release)  # a stream never started never runs its finally
        return held


class _Once:
    """Calls ``fn`` the first time it is called, never again."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def _holding(body: Iterator[bytes], release: _Once) -> Iterator[bytes]:
    try:
        yield from body
    finally:
        release()


@dataclass
class ApiState:
    """``app.state.api``: shared by every request of one app.

    Attributes:
        services: Database, Redis and snapshot pool.
        boards: Leaderboards by (env, role).
        payoffs: Payoff matrices by (env, role, top).
        pages: Rendered leaderboard and match-history pages.
        agent_ids: Agent ids by (env, key), for match listings.
        frames: Re-simulated replay frames of recently viewed matches.
        downloads: Match-log downloads streaming at once.
        fingerprints: Clone fingerprints of snapshots (a bounded LRU in front of Redis).
        fresh_s: How old served data may be (``ARENA_PAGE_CACHE_S``).
        limits: Rate limits and quotas (:mod:`arena.core.limits`).
        newest_match_seq: The newest match seq a read has returned. Every match with
            a smaller seq is committed already (seq order is commit order, see
            :mod:`arena.storage.db.repositories.matches`), so a page of the log before it is
            final.
    """

    services: Services
    boards: BoardCache = field(default_factory=lambda: BoardCache(max_age_s=BOARD_MAX_AGE_S))
    payoffs: VersionedCache[dict[str, Any]] = field(
        default_factory=lambda: VersionedCache(max_age_s=BOARD_MAX_AGE_S, min_age_s=PAYOFF_MIN_AGE_S)
    )
    pages: PageCache = field(default_factory=PageCache)
    agent_ids: AgentIds = field(default_factory=AgentIds)
    frames: FrameCache = field(default_factory=FrameCache)
    downloads: DownloadSlots = field(default_factory=DownloadSlots)
    fingerprints: FingerprintStore = field(init=False)
    fresh_s: float = field(init=False)
    limits: Limits = field(init=False)
    newest_match_seq: int = 0
    _sqlite: bool = field(init=False, repr=False)
    _reader: ThreadPoolExecutor | None = field(default=None, repr=False)
    _ahead: dict[Hashable, asyncio.Future[Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.fresh_s = self.services.settings.page_cache_s
        self.limits = Limits(self.services.redis, self.services.settings, self.services.pool.keys)
        self.fingerprints = FingerprintStore(self.services.pool, self.services.redis, self.services.pool.keys,
                                             max_bytes=self.services.settings.max_upload_bytes)
        with self.services.sessions() as session:  # no connection is opened for this
            self._sqlite = dialect_name(session) == "sqlite"

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a short database read, off the event loop.

        On SQLite every read of this app runs on one thread of its own. The reads
        are in-process CPU work, so more threads would not run them faster: they
        would pass the GIL back and forth between every row (the driver releases it
        around each ``sqlite3_step``), and with the anyio pool's 40 threads that
        hand-off cost tens of milliseconds a page. Off the loop, a read waiting on
        the disk does not hold up the pages served from the cache meanwhile. Reads
        from a database server wait on the network, so they share the thread pool.
        """
        if not self._sqlite:
            return await run_in_threadpool(fn, *args)
        if self._reader is None:  # only the event loop's thread gets here
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="arena-reads")
        return await asyncio.get_running_loop().run_in_executor(self._reader, fn, *args)

    def close(self) -> None:
        """Stops the reader thread after its current read (a later read starts another)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.shutdown(wait=True, cancel_futures=True)

    def read_ahead(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> None:
        """Starts ``fn(*args)`` like :meth:`read`, without waiting for it.

        Nothing is started while the read started under the same ``key`` still runs.
        """
        if key in self._ahead:
            return
        task = asyncio.ensure_future(self.read(fn, *args))
        self._ahead[key] = task
        task.add_done_callback(lambda done: self._read_ahead_done(key, done))

    def _read_ahead_done(self, key: Hashable, task: asyncio.Future[Any]) -> None:
        self._ahead.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("read ahead %r failed", key, exc_info=task.exception())

    def saw_match(self, seq: int) -> None:
        """Notes that a read returned match ``seq``."""
        self.newest_match_seq = max(self.newest_match_seq, seq)  # a race keeps a smaller one: safe
