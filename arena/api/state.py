"""What the API keeps between requests: the services plus its caches."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from arena.api.boards import Board, VersionedCache
from arena.services import Services
from arena.snapshot_cache import SnapshotCache

# A board is rebuilt when its marker moves, and at the latest after this many seconds.
BOARD_MAX_AGE_S = 30.0
# A payoff matrix (a join over the match log) is recomputed at most this often.
PAYOFF_MIN_AGE_S = 10.0


@dataclass
class ApiState:
    """``app.state.api``: shared by every request of one app.

    Attributes:
        services: Database, Redis and snapshot pool.
        boards: Leaderboards by (env, role).
        payoffs: Payoff matrices by (env, role, top).
    """

    services: Services
    boards: VersionedCache[Board] = field(
        default_factory=lambda: VersionedCache(max_age_s=BOARD_MAX_AGE_S)
    )
    payoffs: VersionedCache[dict[str, Any]] = field(
        default_factory=lambda: VersionedCache(
            max_age_s=BOARD_MAX_AGE_S, min_age_s=PAYOFF_MIN_AGE_S
        )
    )
    _policies: SnapshotCache | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
