"""Prometheus metrics: the helpers change what /metrics exposes, read back with the
official exposition parser."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from arena.core.metrics import (
    ArenaMetrics,
    default_metrics,
    metrics_app,
    observe_batch,
    observe_cache_stats,
    observe_worker_stats,
    set_in_flight,
    set_queue_depth,
    set_workers_alive,
)
from arena.engine import MatchRecord
from arena.engine.plan import plan_matches
from arena.runners import AgentSource, InProcessRunner, MatchBatch
from envs.registry import get_spec

ENV = "connect_four-v3"


def scrape(metrics: ArenaMetrics) -> str:
    """The exposition text, fetched over HTTP from the ASGI app as Prometheus would."""
    app = Starlette(routes=[Mount("/metrics", app=metrics_app(metrics))])
    with TestClient(app) as client:
        response = client.get("/metrics/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels``; ``None`` if absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


@pytest.fixture
def metrics() -> ArenaMetrics:
    return ArenaMetrics()


@pytest.fixture(scope="module")
def played() -> list[MatchRecord]:
    """Ten real connect-four records, played by the engine."""
    agents = ["heuristic", "random"]
    jobs = plan_matches(agents, get_spec(ENV), 10, seed=3)
    batch = MatchBatch(ENV, jobs, {a: AgentSource(key=a, builtin=a) for a in agents}, batch_id=0)
    runner = InProcessRunner()
    try:
        [(_, records)] = list(runner.run([batch]))
    finally:
        runner.close()
    assert all(r.termination == "normal" for r in records)
    return records


def test_observe_batch_counts_matches_forfeits_and_times(metrics, played) -> None:
    forfeits = [dataclasses.replace(played[0], termination="illegal_action", forfeit_seat=1),
                dataclasses.replace(played[1], termination="timeout", forfeit_seat=0),
                dataclasses.replace(played[2], termination="timeout", forfeit_seat=1)]
    batch = forfeits + played[3:]
    assert value(scrape(metrics), "arena_matches_played_total", env=ENV) is None

    observe_batch(batch, commit_seconds=0.2, rating_seconds=0.03, metrics=metrics)

    text = scrape(metrics)
    assert value(text, "arena_matches_played_total", env=ENV) == 10
    assert value(text, "arena_matches_forfeited_total", env=ENV, reason="illegal_action") == 1
    assert value(text, "arena_matches_forfeited_total", env=ENV, reason="timeout") == 2
    assert value(text, "arena_matches_forfeited_total", env=ENV, reason="normal") is None
    assert value(text, "arena_commit_seconds_count") == 1
    assert value(text, "arena_commit_seconds_sum") == pytest.approx(0.2)
    assert value(text, "arena_commit_seconds_bucket", le="0.1") == 0
    assert value(text, "arena_commit_seconds_bucket", le="0.25") == 1
    assert value(text, "arena_rating_update_seconds_sum") == pytest.approx(0.03)


def test_batches_accumulate_and_an_empty_batch_still_times_its_commit(metrics, played) -> None:
    observe_batch(played, commit_seconds=0.1, rating_seconds=0.01, metrics=metrics)
    observe_batch(played[:4], commit_seconds=0.1, rating_seconds=0.01, metrics=metrics)
    observe_batch([], commit_seconds=0.05, rating_seconds=0.0, metrics=metrics)  # all duplicates
    text = scrape(metrics)
    assert value(text, "arena_matches_played_total", env=ENV) == 14
    assert value(text, "arena_commit_seconds_count") == 3
    assert value(text, "arena_rating_update_seconds_count") == 3


def test_an_unknown_termination_is_refused_so_label_values_stay_bounded(metrics, played) -> None:
    bogus = dataclasses.replace(played[0], termination="exploded")
    with pytest.raises(ValueError):
        observe_batch([bogus], commit_seconds=0.1, rating_seconds=0.01, metrics=metrics)


def test_gauges_follow_the_last_value_and_never_go_negative(metrics) -> None:
    set_queue_depth(7, metrics=metrics)
    set_in_flight(ENV, 4096, metrics=metrics)
    set_in_flight("tictactoe-v3", 12, metrics=metrics)
    set_workers_alive(3, metrics=metrics)
    text = scrape(metrics)
    assert value(text, "arena_queue_depth") == 7
    assert value(text, "arena_matches_in_flight", env=ENV) == 4096
    assert value(text, "arena_matches_in_flight", env="tictactoe-v3") == 12
    assert value(text, "arena_workers_alive") == 3

    set_queue_depth(-1, metrics=metrics)
    set_in_flight(ENV, 0, metrics=metrics)
    text = scrape(metrics)
    assert value(text, "arena_queue_depth") == 0
    assert value(text, "arena_matches_in_flight", env=ENV) == 0


def test_cache_counters_add_each_workers_increase_and_survive_a_restart(metrics) -> None:
    observe_cache_stats("101", hits=10, misses=2, metrics=metrics)
    observe_cache_stats("202", hits=5, misses=5, metrics=metrics)
    observe_cache_stats("101", hits=15, misses=3, metrics=metrics)  # +5 hits, +1 miss
    text = scrape(metrics)
    assert value(text, "arena_snapshot_cache_hits_total") == 20
    assert value(text, "arena_snapshot_cache_misses_total") == 8

    observe_cache_stats("101", hits=1, misses=1, metrics=metrics)  # restarted from zero
    text = scrape(metrics)
    assert value(text, "arena_snapshot_cache_hits_total") == 21
    assert value(text, "arena_snapshot_cache_misses_total") == 9


def test_worker_stats_set_workers_alive_and_feed_the_cache_counters(metrics) -> None:
    # The shape RayMatchRunner.stats() returns (a worker without snapshots has None).
    stats = [{"pid": 11, "snapshot_cache": {"hits": 4, "misses": 1, "evictions": 0,
                                            "size": 1, "capacity": 32}},
             {"pid": 12, "snapshot_cache": None}]
    observe_worker_stats(stats, metrics=metrics)
    text = scrape(metrics)
    assert value(text, "arena_workers_alive") == 2
    assert value(text, "arena_snapshot_cache_hits_total") == 4
    assert value(text, "arena_snapshot_cache_misses_total") == 1


def test_metrics_path_without_slash_redirects_to_the_app(metrics) -> None:
    set_queue_depth(2, metrics=metrics)
    app = Starlette(routes=[Mount("/metrics", app=metrics_app(metrics))])
    with TestClient(app) as client:
        response = client.get("/metrics", follow_redirects=True)
    assert response.status_code == 200
    assert value(response.text, "arena_queue_depth") == 2


def test_default_metrics_are_one_per_process_with_process_collectors(played) -> None:
    assert default_metrics() is default_metrics()
    before = value(scrape(default_metrics()), "arena_matches_played_total", env=ENV) or 0.0
    observe_batch(played[:2], commit_seconds=0.01, rating_seconds=0.001)  # no metrics=: default
    text = scrape(default_metrics())
    assert value(text, "arena_matches_played_total", env=ENV) == before + 2
    assert "python_info" in {family.name for family in text_string_to_metric_families(text)}


def test_separate_metrics_objects_do_not_share_counts(played) -> None:
    a, b = ArenaMetrics(), ArenaMetrics()
    observe_batch(played, commit_seconds=0.1, rating_seconds=0.01, metrics=a)
    assert value(scrape(a), "arena_matches_played_total", env=ENV) == 10
    assert value(scrape(b), "arena_matches_played_total", env=ENV) is None


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_real_ray_worker_stats_feed_workers_alive(ray_cluster) -> None:
    from arena.runners.on_ray import RayMatchRunner

    metrics = ArenaMetrics()
    runner = RayMatchRunner(num_workers=2)
    try:
        observe_worker_stats(runner.stats(timeout_s=120), metrics=metrics)  # wait for both to start
    finally:
        runner.close()
    assert value(scrape(metrics), "arena_workers_alive") == 2
