"""Building blocks of the API tests: checkpoints as bytes, users, seeded ladders, counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.ladder.challenge_queue import ChallengeQueue
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.ladder.lane import ConnectedLane
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.db.base import Base
from arena.storage.wiring import Services

ENV = "tictactoe-v3"
RAISED_LIMITS = {
    "submissions_per_day": 1000, "signups_per_hour": 10_000, "writes_per_minute": 10_000,
    "client_writes_per_minute": 100_000, "challenge_matches_per_hour": 1_000_000, "challenges_in_flight": 100,
}
"""Abuse limits for tests that sign up and submit far more than a person would from one
address in a minute (tests/api/test_limits.py tests the defaults)."""
TINY = {"hidden": [8]}  # ~1 KB of weights: fits the tests' 4 KiB upload limit
API = "/api/v1"


def checkpoint(env: str = ENV, seed: int = 0, hparams: dict | None = None,
               name: str | None = None) -> tuple[bytes, str, dict[str, Any]]:
    """``(weights bytes, spec JSON text, state dict)`` of a fresh small MLP."""
    state, spec = random_init_checkpoint(env, "mlp", hparams or TINY, seed=seed, name=name)
    return serialize_weights(state), json.dumps(spec.to_json()), state


def upload(client: TestClient, token: str | None, weights: bytes | None, spec: str | None,
           env: str | None = ENV, name: str | None = "tiny", **extra: str):
    """``POST /agents`` as multipart/form-data; a ``None`` field is left out."""
    parts: list[tuple[str, tuple]] = []
    if weights is not None:
        parts.append(("weights", ("agent.safetensors", weights, "application/octet-stream")))
    for key, value in {"spec": spec, "env": env, "name": name, **extra}.items():
        if value is not None:
            parts.append((key, (None, value)))
    headers = {} if token is None else auth(token)
    return client.post(f"{API}/agents", files=parts, headers=headers)


def new_user(client: TestClient, name: str) -> str:
    """Create a user; returns its token."""
    response = client.post(f"{API}/users", json={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["token"]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def seed_ladder(services: Services, keys: list[str], matches: int, env: str = ENV,
                seed: int = 1) -> dict[str, int]:
    """Play ``matches`` rated matches of builtin ``keys``; returns their agent ids."""
    ladder = open_ladder(services.sessions, LadderConfig(env, batch_size=200, seed=seed))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in keys])
    runner = InProcessRunner()
    try:
        ladder.run(runner, matches)
    finally:
        runner.close()
    return dict(ladder.agent_ids)


def play_challenges(services: Services) -> int:
    """Play every queued challenge as the background service does (its challenge queue,
    one challenge at a time, on a lane of its own); returns how many ended (done or failed).

    The API tests run no background service: a challenge stays queued until this runs."""
    lane = ConnectedLane(services)
    queue = ChallengeQueue(services, lane)
    ended = 0
    try:
        while (future := queue.take()) is not None:
            future.exception(timeout=300)  # waits; a failed challenge says why in its record
            ended += 1
    finally:
        lane.close()
    return ended


def challenge(client: TestClient, services: Services, body: dict[str, Any], token: str) -> dict[str, Any]:
    """``POST /challenges`` (202), play the queue, then ``GET`` it: the challenge, done or failed."""
    queued = client.post(f"{API}/challenges", json=body, headers=auth(token))
    assert queued.status_code == 202, queued.text
    assert queued.headers["Location"] == f"{API}/challenges/{queued.json()['id']}"
    play_challenges(services)
    ended = client.get(queued.headers["Location"])
    assert ended.status_code == 200, ended.text
    return ended.json()


def stored_state(services: Services) -> dict[str, Any]:
    """Everything a submission could leave behind: rows, Redis keys, snapshot files (the
    abuse-limit counters are not stored data: every request counts, refused or not)."""
    with services.sessions() as session:
        _, agents = repo.page_agents(session, limit=1)
        snapshots = len(repo.list_snapshots(session))
    root = Path(services.settings.snapshot_dir)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []
    prefix = services.pool.keys.prefix
    limits = (f"{prefix}:limit:", f"{prefix}:busy:")
    redis_keys = sum(1 for key in services.redis.scan_iter() if not key.decode().startswith(limits))
    return {"agents": agents, "snapshots": snapshots, "redis_keys": redis_keys, "files": files}


def every_row_and_key(services: Services) -> dict[str, Any]:
    """Every row of every table and every Redis key with its value (a read must change none)."""
    with services.sessions() as session:
        tables = {t.name: sorted(repr(tuple(r)) for r in session.execute(select(t)))
                  for t in Base.metadata.sorted_tables}
    client = services.redis
    keys = {k: client.dump(k) for k in client.scan_iter()}
    return {"tables": tables, "redis": keys}
