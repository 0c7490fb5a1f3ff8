"""Match workers on GPUs: the share each asks Ray for, the device each plays on, and what
they report, on the suite's CPU-only Ray cluster with logical GPUs (tests/conftest.py)."""

from __future__ import annotations

import logging
import time

import pytest
import torch
from prometheus_client import generate_latest

from arena.core.metrics import ArenaMetrics, observe_worker_stats
from arena.engine import MatchEngine
from arena.runners import InProcessRunner
from arena.runners.devices import gpus_per_worker, match_engine, select_device
from tests.runners.test_ray_runner import _batches

CUDA = torch.cuda.is_available()


def test_the_cluster_s_gpus_are_shared_evenly_unless_a_share_is_set(caplog):
    assert gpus_per_worker(0, 4) == 0.0  # no GPUs: CPU workers
    assert gpus_per_worker(4, 2) == 1.0  # at most one each
    assert gpus_per_worker(1, 4) == 0.25
    assert gpus_per_worker(4, 2, requested=0) == 0.0  # CPU workers on a GPU cluster
    assert gpus_per_worker(4, 2, requested=0.5) == 0.5
    with caplog.at_level(logging.WARNING, logger="arena.runners.devices"):
        assert gpus_per_worker(0, 2, requested=0.5) == 0.0  # would never be scheduled
        assert gpus_per_worker(1, 4, requested=0.5) == 0.5  # two of them wait
    assert [r.getMessage() for r in caplog.records] == [
        "ARENA_RAY_GPUS_PER_WORKER=0.5, but the Ray cluster has no GPU resources; match workers play on CPU",
        "4 match workers x 0.5 GPU exceed the cluster's 1 GPUs; some workers wait for a GPU to become free",
    ]
    with pytest.raises(ValueError, match="at least 1"):
        gpus_per_worker(4, 0)


def test_a_worker_plays_on_cuda_only_with_a_gpu_and_cuda():
    assert select_device([], cuda_available=True) == ("cpu", "no GPU assigned by Ray")
    assert select_device(["1"], cuda_available=True) == ("cuda", "Ray assigned GPU 1")
    device, why = select_device(["0", "1"], cuda_available=False)
    assert device == "cpu" and why.startswith("Ray assigned GPU 0, 1 but CUDA is not available")
    engine = match_engine("cpu")
    assert type(engine) is MatchEngine  # the numpy engine: faster on a CPU


@pytest.mark.skipif(not CUDA, reason="no CUDA device here")
def test_a_cuda_worker_gets_the_device_engine():
    from arena.engine.device import DeviceMatchEngine

    assert isinstance(match_engine("cuda"), DeviceMatchEngine)


def _gauge(metrics: ArenaMetrics, device: str, gpu: str) -> float:
    text = generate_latest(metrics.registry).decode()
    line = f'arena_workers_on_device{{device="{device}",gpu="{gpu}"}} '
    return float(next(row for row in text.splitlines() if row.startswith(line)).split()[-1])


def _free_gpus_reach(ray, expected: float, timeout_s: float = 30.0) -> float:
    """The cluster's free GPUs once they equal ``expected`` (Ray reports them with a lag)."""
    deadline = time.monotonic() + timeout_s
    while True:
        free = ray.available_resources().get("GPU", 0.0)
        if abs(free - expected) < 1e-9 or time.monotonic() > deadline:
            return free
        time.sleep(0.2)


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_workers_take_a_gpu_each_and_fall_back_to_cpu_without_cuda(ray_cluster, caplog):
    from arena.runners.on_ray import RayMatchRunner

    total = ray_cluster.cluster_resources()["GPU"]
    assert total == 4  # logical GPUs of the shared test cluster
    metrics = ArenaMetrics()
    batches = _batches(2, 100)
    with caplog.at_level(logging.INFO, logger="arena.runners.on_ray"):
        runner = RayMatchRunner(num_workers=2)
        try:
            stats = runner.stats(timeout_s=120)
            free = _free_gpus_reach(ray_cluster, total - 2)
            played = {b.batch_id: recs for b, recs in runner.run(batches)}
        finally:
            runner.close()
    observe_worker_stats(stats, metrics=metrics)

    assert runner.gpus_per_worker == 1.0 and free == total - 2
    assert len(stats) == 2 and all(len(s["gpu_ids"]) == 1 for s in stats)
    assert stats[0]["gpu_ids"] != stats[1]["gpu_ids"]  # one GPU each
    local = {b.batch_id: recs for b, recs in InProcessRunner().run(batches)}
    assert {i: [r.actions for r in recs] for i, recs in played.items()} == \
        {i: [r.actions for r in recs] for i, recs in local.items()}
    if CUDA:
        assert {s["device"] for s in stats} == {"cuda"}
        return
    assert {s["device"] for s in stats} == {"cpu"}
    assert _gauge(metrics, "cpu", "assigned") == 2 and _gauge(metrics, "cuda", "assigned") == 0
    fallbacks = [r for r in caplog.records
                 if r.levelno == logging.WARNING and "CUDA is not available" in r.getMessage()]
    assert len(fallbacks) == 2  # the driver says it once per worker
    assert {r.device for r in fallbacks} == {"cpu"}


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_fractional_and_zero_gpu_shares(ray_cluster):
    from arena.runners.on_ray import RayMatchRunner

    total = ray_cluster.cluster_resources()["GPU"]
    runner = RayMatchRunner(num_workers=2, gpus_per_worker=0.25)
    try:
        stats = runner.stats(timeout_s=120)
        free = _free_gpus_reach(ray_cluster, total - 0.5)
    finally:
        runner.close()
    assert free == total - 0.5 and all(len(s["gpu_ids"]) == 1 for s in stats) and len(stats) == 2

    metrics = ArenaMetrics()
    runner = RayMatchRunner(num_workers=2, gpus_per_worker=0)
    try:
        stats = runner.stats(timeout_s=120)
        free = _free_gpus_reach(ray_cluster, total)
    finally:
        runner.close()
    observe_worker_stats(stats, metrics=metrics)
    assert free == total and [s["gpu_ids"] for s in stats] == [[], []]
    assert {(s["device"], s["device_reason"]) for s in stats} == {("cpu", "no GPU assigned by Ray")}
    assert _gauge(metrics, "cpu", "none") == 2 and _gauge(metrics, "cpu", "assigned") == 0
