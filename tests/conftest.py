"""Shared fixtures: real services, started once per test session.

Ray tests are grouped onto one xdist worker (``xdist_group("ray")`` with
``--dist loadgroup``) so the suite starts a single Ray cluster.
"""

from __future__ import annotations

import gc
import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local test cluster on loopback only
# Ray starts its workers at nice 15: beside the other pytest worker (the same session, so
# the same scheduler group) they got a few percent of a CPU, and a probe task that takes
# 13 s at equal priority took 100 s (tests/evaluation/test_probes.py, two busy loops beside).
os.environ.setdefault("RAY_worker_niceness", "0")


@pytest.fixture(scope="session", autouse=True)
def frozen_heap():
    """What the session has loaded by its first test (the modules of all the collected tests:
    torch, SQLAlchemy, FastAPI, ...) moved out of the collector's sight once, as ``arena serve``
    does at start-up. The app's lifespan finds the heap frozen and leaves it: it no longer pays
    a full collection of this heap at each TestClient start (0.2-0.4 s, for hundreds of tests)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the whole session: 2 CPUs, no dashboard, small store.

    It declares 4 logical GPUs (on a CPU-only machine), so match workers take the GPU
    placement path in every Ray test and fall back to CPU inside (no CUDA): as many
    2-worker runners fit at once as the 2 CPUs allow (each worker takes half a CPU and
    one GPU).
    """
    ray = pytest.importorskip("ray")
    from arena.core.settings import Settings
    from arena.runners.on_ray import init_ray

    init_ray(Settings(ray_object_store_bytes=256 * 1024 * 1024), num_cpus=2, num_gpus=4)
    yield ray
    ray.shutdown()


from tests.fixtures_db import *
from tests.fixtures_redis import (  # noqa: F401 - fixtures shared by the suite
    embedded_redis,
    redis_key_prefix,
    redis_url,
    snapshot_pool,
    system_redis_url,
)
