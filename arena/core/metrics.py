"""Prometheus metrics of the Arena service: what a dashboard or an alert needs.

Exposed at ``/metrics`` (:func:`metrics_app`, an ASGI app the API mounts), all prefixed
``arena_``:

=====================================  =========  ==========================================
``matches_played_total{env}``          counter    matches recorded (each match once, however
                                                  often its batch was delivered)
``matches_forfeited_total{env,reason}`` counter   of those, forfeits; ``reason`` is the
                                                  termination (``illegal_action``, ``error``,
                                                  ``invalid_output``, ``timeout``)
``queue_depth``                        gauge      submissions waiting for validation
``matches_in_flight{env}``             gauge      matches scheduled but not yet recorded
``workers_alive``                      gauge      Ray match workers that answered last poll
``workers_on_device{device,gpu}``      gauge      of those, by the device they play on
                                                  (``cpu``/``cuda``) and whether Ray assigned
                                                  them a GPU (``assigned``/``none``):
                                                  ``device="cpu",gpu="assigned"`` counts
                                                  workers that fell back to the CPU because
                                                  CUDA is absent
``rating_update_seconds``              histogram  TrueSkill updates of one recorded batch
``commit_seconds``                     histogram  one batch's recording transaction, end to
                                                  end (insert, rate, write, commit)
``snapshot_cache_hits_total``          counter    snapshot-cache hits, summed over workers
``snapshot_cache_misses_total``        counter    snapshot-cache misses, summed over workers
=====================================  =========  ==========================================

plus the ``process_*`` and ``python_*`` metrics of the serving process. Label values
are bounded: ``env`` by the env registry, ``reason`` by
:class:`~arena.engine.records.Termination`.

The metrics live in an :class:`ArenaMetrics` object with its own registry (tests build
their own); the service uses the one :func:`default_metrics` returns, which the helper
functions (:func:`observe_batch`, ...) default to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Protocol

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    make_asgi_app,
    start_http_server,
)

from arena.engine.records import Termination

__all__ = [
    "ArenaMetrics",
    "default_metrics",
    "metrics_app",
    "observe_batch",
    "observe_cache_stats",
    "observe_worker_stats",
    "set_in_flight",
    "set_matches_queued",
    "set_queue_depth",
    "set_workers_alive",
    "start_metrics_server",
]

NAMESPACE = "arena"
# A batch is recorded in one transaction: milliseconds for a few hundred matches on
# SQLite, up to seconds for thousands on a busy PostgreSQL.
COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RATING_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class RecordLike(Protocol):
    """What the metrics read of a :class:`~arena.engine.MatchRecord`."""

    env: str
    termination: str


class ArenaMetrics:
    """The service's metrics, registered in one registry.

    Args:
        registry: Where to register; a fresh :class:`CollectorRegistry` by default.
        process_collectors: Also export this process's ``process_*``/``python_*``
            metrics (the served registry wants them; a test's usually does not).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 process_collectors: bool = False) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        if process_collectors:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)
        kw: dict[str, Any] = {"namespace": NAMESPACE, "registry": self.registry}
        self.matches_played = Counter("matches_played", "Matches recorded.", ["env"], **kw)
        self.matches_forfeited = Counter(
            "matches_forfeited", "Recorded matches that ended in a forfeit, by termination.",
            ["env", "reason"], **kw)
        self.queue_depth = Gauge("queue_depth", "Submissions waiting for validation.", **kw)
        self.matches_queued = Gauge(
            "matches_queued", "Matches in the persisted queue (scheduled, not yet recorded).",
            ["env"], **kw)
        self.in_flight = Gauge("matches_in_flight", "Matches scheduled but not yet recorded.",
                               ["env"], **kw)
        self.workers_alive = Gauge("workers_alive", "Ray match workers that answered.", **kw)
        self.workers_on_device = Gauge(
            "workers_on_device", "Ray match workers that answered, by the device they play on and "
            "whether Ray assigned them a GPU (cpu + assigned: CUDA absent, fell back to CPU).",
            ["device", "gpu"], **kw)
        self.rating_seconds = Histogram(
            "rating_update_seconds", "TrueSkill updates of one recorded batch.",
            buckets=RATING_BUCKETS, **kw)
        self.commit_seconds = Histogram(
            "commit_seconds", "Recording transaction of one batch (insert, rate, commit).",
            buckets=COMMIT_BUCKETS, **kw)
        self.cache_hits = Counter("snapshot_cache_hits", "Snapshot-cache hits (all workers).", **kw)
        self.cache_misses = Counter("snapshot_cache_misses",
                                    "Snapshot-cache misses (all workers).", **kw)
        # Workers report cumulative cache counters; the last report of each is kept so
        # only the increase is added (a restarted worker starts again from zero).
        self._cache_seen: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def observe_batch(self, records: Iterable[RecordLike], commit_seconds: float,
                      rating_seconds: float) -> None:
        """Count newly recorded matches and time their recording (see :func:`observe_batch`)."""
        played: dict[str, int] = {}
        forfeits: dict[tuple[str, str], int] = {}
        for record in records:
            played[record.env] = played.get(record.env, 0) + 1
            termination = Termination(record.termination)
            if termination.is_forfeit:
                key = (record.env, termination.value)
                forfeits[key] = forfeits.get(key, 0) + 1
        for env, n in played.items():
            self.matches_played.labels(env=env).inc(n)
        for (env, reason), n in forfeits.items():
            self.matches_forfeited.labels(env=env, reason=reason).inc(n)
        self.commit_seconds.observe(max(0.0, commit_seconds))
        self.rating_seconds.observe(max(0.0, rating_seconds))

    def observe_cache_stats(self, worker: str, hits: int, misses: int) -> None:
        """Add the increase of one worker's cumulative cache counters since its last report."""
        with self._lock:
            last_hits, last_misses = self._cache_seen.get(worker, (0, 0))
            if hits < last_hits or misses < last_misses:  # the worker restarted
                last_hits = last_misses = 0
            self._cache_seen[worker] = (hits, misses)
        self.cache_hits.inc(hits - last_hits)
        self.cache_misses.inc(misses - last_misses)


@lru_cache(maxsize=1)
def default_metrics() -> ArenaMetrics:
    """The metrics of this process (with its process collectors), created on first use."""
    return ArenaMetrics(process_collectors=True)


def _or_default(metrics: ArenaMetrics | None) -> ArenaMetrics:
    return metrics if metrics is not None else default_metrics()


def observe_batch(records: Iterable[RecordLike], commit_seconds: float, rating_seconds: float,
                  *, metrics: ArenaMetrics | None = None) -> None:
    """Record one committed batch: the matches it newly recorded and how long it took.

    Args:
        records: The records this batch inserted for the first time (not the
            duplicates of a re-delivered batch, so every match counts once).
        commit_seconds: Wall time of the whole recording transaction.
        rating_seconds: The part of it spent updating ratings.
        metrics: Where to count (default: :func:`default_metrics`).
    """
    _or_default(metrics).observe_batch(records, commit_seconds, rating_seconds)


def set_queue_depth(depth: int, *, metrics: ArenaMetrics | None = None) -> None:
    """Submissions currently waiting for validation."""
    _or_default(metrics).queue_depth.set(max(0, depth))


def set_matches_queued(env: str, matches: int, *, metrics: ArenaMetrics | None = None) -> None:
    """Matches of ``env`` in the persisted queue."""
    _or_default(metrics).matches_queued.labels(env=env).set(max(0, matches))


def set_in_flight(env: str, matches: int, *, metrics: ArenaMetrics | None = None) -> None:
    """Matches of ``env`` scheduled but not yet recorded."""
    _or_default(metrics).in_flight.labels(env=env).set(max(0, matches))


def set_workers_alive(workers: int, *, metrics: ArenaMetrics | None = None) -> None:
    """Ray match workers that answered the last poll."""
    _or_default(metrics).workers_alive.set(max(0, workers))


def observe_cache_stats(worker: str, hits: int, misses: int, *,
                        metrics: ArenaMetrics | None = None) -> None:
    """One worker's cumulative snapshot-cache counters (only the increase is counted).

    Args:
        worker: A stable id of the worker (its pid, its actor id).
        hits: Cache hits since the worker started.
        misses: Cache misses since the worker started.
        metrics: Where to count (default: :func:`default_metrics`).
    """
    _or_default(metrics).observe_cache_stats(worker, hits, misses)


def observe_worker_stats(stats: Iterable[Mapping[str, Any]], *,
                         metrics: ArenaMetrics | None = None) -> None:
    """Feed :meth:`RayMatchRunner.stats() <arena.runners.on_ray.RayMatchRunner.stats>` output.

    Sets ``workers_alive`` to the number of answers, ``workers_on_device`` to their
    count per (device, GPU assigned or not), and adds each worker's cache-counter
    increase (``{"pid": ..., "device": "cpu", "gpu_ids": [...], "snapshot_cache":
    {"hits": ..., "misses": ...} | None}``).
    """
    metrics = _or_default(metrics)
    answers = list(stats)
    metrics.workers_alive.set(len(answers))
    on_device = {(d, g): 0 for d in ("cpu", "cuda") for g in ("assigned", "none")}
    for answer in answers:
        key = (answer.get("device", "cpu"), "assigned" if answer.get("gpu_ids") else "none")
        on_device[key] = on_device.get(key, 0) + 1
    for (device, gpu), count in on_device.items():
        metrics.workers_on_device.labels(device=device, gpu=gpu).set(count)
    for i, answer in enumerate(answers):
        cache = answer.get("snapshot_cache")
        if cache:
            worker = str(answer.get("pid", i))
            metrics.observe_cache_stats(worker, int(cache["hits"]), int(cache["misses"]))


def metrics_app(metrics: ArenaMetrics | None = None) -> Callable:
    """An ASGI app serving the metrics in the Prometheus text format.

    Mount it on the API: ``app.mount("/metrics", metrics_app())`` (``/metrics`` then
    redirects to ``/metrics/``, which Prometheus follows).
    """
    return make_asgi_app(registry=_or_default(metrics).registry)


def start_metrics_server(port: int, addr: str = "0.0.0.0", *,
                         metrics: ArenaMetrics | None = None) -> None:
    """Serve the metrics over HTTP from a daemon thread (for processes without the API,
    e.g. the league manager)."""
    start_http_server(port, addr=addr, registry=_or_default(metrics).registry)
