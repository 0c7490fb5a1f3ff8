"""A ladder across a two-node Ray cluster (``ray start --head`` plus a joining node on
loopback), on PostgreSQL and a real Redis, while faults are injected: worker processes
SIGKILLed, Redis killed and restarted, the database cut off. Runs ``benchmarks/chaos.py``
at a small size in its own process (a driver joins one Ray cluster per process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_db import _find_postgres

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.postgres, pytest.mark.redis]
KEYS = {"scheduled", "recorded", "lost", "duplicated", "worker_kills", "redis_restarts", "db_outage_s",
        "ratings_match_rebuild", "pool_intact", "ray_resources_leaked", "queue_left", "redispatched_batches",
        "nodes", "runs", "seconds"}
"""The keys of ``benchmarks/chaos.py``'s JSON line (this test is its run in the suite)."""


def test_ladder_across_two_ray_nodes_survives_faults_with_nothing_lost_or_doubled():
    server_url, errors = _find_postgres()
    if server_url is None:
        pytest.skip(f"PostgreSQL unreachable ({errors})")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), "--matches", "2000", "--batch-size", "100",
           "--max-rate", "200", "--kill-every", "3", "--redis-kill-at", "2", "--redis-down-s", "1.5",
           "--db-outage-at", "4", "--db-outage-s", "3", "--postgres-url", server_url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result), KEYS - set(result)
    assert result["nodes"] == 2, result  # the workers ran on both nodes
    assert result["scheduled"] == result["recorded"] == 2000, result
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert result["ratings_match_rebuild"] is True and result["pool_intact"] is True, result
    assert result["queue_left"] == 0 and result["ray_resources_leaked"] is False, result
    # The faults did happen (otherwise this would prove nothing).
    assert result["worker_kills"] >= 1 and result["redis_restarts"] == 1 and result["db_outage_s"] == 3
