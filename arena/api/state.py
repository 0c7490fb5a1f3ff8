"""What the API keeps between requests: the services plus its caches."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from arena.api.boards import BoardCache, VersionedCache
from arena.services import Services
from arena.snapshot_cache import SnapshotCache

# A board is refreshed when its marker moves, and reloaded in full after this many seconds.
BOARD_MAX_AGE_S = 300.0
# A payoff matrix (a join over the match log) is recomputed at most this often.
PAYOFF_MIN_AGE_S = 10.0


class PageCache:
    """Serialized responses of hot read endpoints, reused for ``fresh_s`` seconds.

    The leaderboard is derived data that changes a few times a second while ladders
    run; serving the same page bytes for half a second lets 32 concurrent readers
    be answered from the event loop without a database round trip or a thread hop.
    """

    def __init__(self, fresh_s: float = 0.5, max_entries: int = 1024) -> None:
        self.fresh_s = fresh_s
        self.max_entries = max_entries
        self._pages: dict[Hashable, tuple[float, bytes]] = {}

    def get(self, key: Hashable) -> bytes | None:
        hit = self._pages.get(key)
        if hit is None or time.monotonic() - hit[0] > self.fresh_s:
            return None
        return hit[1]

    def put(self, key: Hashable, body: bytes) -> None:
        if len(self._pages) >= self.max_entries:
            self._pages.pop(next(iter(self._pages)))
        self._pages[key] = (time.monotonic(), body)

    def clear(self) -> None:
        self._pages.clear()


@dataclass
class ApiState:
    """``app.state.api``: shared by every request of one app.

    Attributes:
        services: Database, Redis and snapshot pool.
        boards: Leaderboards by (env, role).
        payoffs: Payoff matrices by (env, role, top).
    """

    services: Services
    boards: BoardCache = field(default_factory=lambda: BoardCache(max_age_s=BOARD_MAX_AGE_S))
    payoffs: VersionedCache[dict[str, Any]] = field(
        default_factory=lambda: VersionedCache(max_age_s=BOARD_MAX_AGE_S, min_age_s=PAYOFF_MIN_AGE_S)
    )
    pages: PageCache = field(init=False)
    _policies: SnapshotCache | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.pages = PageCache(fresh_s=self.services.settings.page_cache_s)

    @property
    def policies(self) -> SnapshotCache:
        """Neural policies for challenges: a bounded LRU over the snapshot pool."""
        with self._lock:
            if self._policies is None:
                settings = self.services.settings
                self._policies = SnapshotCache(
                    self.services.pool, capacity=settings.snapshot_cache_size,
                    max_bytes=settings.max_upload_bytes,
                )
            return self._policies
