"""Match batches on real Ray actors, including a worker killed mid-run."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from arena.engine.plan import plan_matches
from arena.runners import AgentSource, InProcessRunner, MatchBatch
from envs.registry import get_spec

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

AGENTS = ["heuristic", "heuristic:epsilon=0.5", "random"]


def _batches(n_batches: int, size: int) -> list[MatchBatch]:
    spec = get_spec("connect_four-v3")
    jobs = plan_matches(AGENTS, spec, n_batches * size, seed=9)
    sources = {a: AgentSource(key=a, builtin=a) for a in AGENTS}
    return [MatchBatch("connect_four-v3", jobs[i * size:(i + 1) * size], sources, batch_id=i)
            for i in range(n_batches)]


def test_ray_runner_plays_every_batch_like_the_in_process_runner(ray_cluster):
    from arena.runners.on_ray import RayMatchRunner

    batches = _batches(6, 200)
    runner = RayMatchRunner(num_workers=2)
    try:
        results = {b.batch_id: recs for b, recs in runner.run(batches)}
    finally:
        runner.close()
    local = {b.batch_id: recs for b, recs in InProcessRunner().run(batches)}
    assert sorted(results) == list(range(6))
    key = lambda r: (r.match_id, r.actions, r.winner)
    for i in range(6):
        assert [key(r) for r in results[i]] == [key(r) for r in local[i]]


def test_killed_worker_loses_nothing_and_duplicates_nothing(ray_cluster):
    from arena.runners.on_ray import RayMatchRunner

    batches = _batches(12, 300)
    runner = RayMatchRunner(num_workers=2, max_in_flight=4)
    seen: Counter = Counter()
    killed = False
    try:
        for batch, records in runner.run(batches):
            seen.update(r.match_id for r in records)
            if not killed:
                # Kill one actor's process for real; its in-flight batches are re-dispatched.
                pid = runner.stats()[0]["pid"]
                os.kill(pid, signal.SIGKILL)
                killed = True
    finally:
        runner.close()
    scheduled = {j.match_id for b in batches for j in b.jobs}
    assert set(seen) == scheduled
    assert max(seen.values()) == 1
    assert runner.redispatched >= 1
