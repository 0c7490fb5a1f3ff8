"""A bounded least-recently-used cache whose values are built outside its lock."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BuildingLru(Generic[K, V]):
    """At most ``capacity`` values by key, the least recently used dropped first (thread-safe).

    A miss builds its value outside the lock, so a slow build holds up no other lookup;
    two threads missing one key both build it and the later one is kept.

    Args:
        capacity: Most values held at once.
        on_evict: Called with the key of each value dropped for room (under the lock).

    Attributes:
        hits: Lookups answered from the cache.
        misses: Lookups that built their value.
        evictions: Values dropped for room.
    """

    def __init__(self, capacity: int, on_evict: Callable[[K], None] | None = None) -> None:
        self.capacity = capacity
        self.on_evict = on_evict
        self.hits = self.misses = self.evictions = 0
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value of ``key``: the cached one, else ``build()`` (then cached)."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
                self.hits += 1
                return value
            self.misses += 1
        value = build()  # outside the lock: a slow build holds up no other lookup
        with self._lock:
            self._values[key] = value  # a concurrent build of the same key is replaced
            self._values.move_to_end(key)
            while len(self._values) > self.capacity:
                evicted, _ = self._values.popitem(last=False)
                self.evictions += 1
                if self.on_evict is not None:
                    self.on_evict(evicted)
        return value

    def counts(self) -> tuple[int, int, int, int]:
        """``(hits, misses, evictions, size)``, read together."""
        with self._lock:
            return self.hits, self.misses, self.evictions, len(self._values)

    def clear(self) -> None:
        """Drop every value and reset the counters."""
        with self._lock:
            self._values.clear()
            self.hits = self.misses = self.evictions = 0
