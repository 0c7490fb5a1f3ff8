"""The grace of a connected agent runs from its drop or its matches' start, not from each request.

The engine asks the agents of a batch one after another: a batch holding several offline
agents must wait one grace, not one per agent; an agent that dropped long ago and has no
new matches is offline at once; a person who connects after the game was claimed is
waited for and gets the request. Real Redis; the policy's clock is a fake one that moves
only when the policy sleeps, so no test waits for real and none times anything.
"""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import redis

from agents.policy import MatchRng
from arena.connected import policy as policy_module
from arena.connected.broker import ConnectedBroker
from arena.connected.policy import DISCONNECTED, ConnectedPolicy
from arena.connected.time_controls import TimeControl
from arena.engine.plan import plan_matches
from arena.snapshots.keys import RedisKeys
from envs.registry import get_spec

ENV = "connect_four-v3"
GRACE = TimeControl(grace_s=20.0)


class FakeTime:
    """``time`` for the policy module: sleeping moves the clock; ``on_sleep`` runs at each sleep."""

    def __init__(self, start: float) -> None:
        self.t, self.start, self.slept = 0.0, start, 0.0
        self.on_sleep = None

    def module(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(time=lambda: self.start + self.t, monotonic=lambda: self.t, sleep=self.sleep)

    def sleep(self, s: float) -> None:
        self.t += s
        self.slept += s
        if self.on_sleep is not None:
            self.on_sleep()


@pytest.fixture
def broker(redis_url: str, redis_key_prefix: str):
    client = redis.Redis.from_url(redis_url)
    yield ConnectedBroker(client, RedisKeys(redis_key_prefix))
    client.close()


@pytest.fixture
def clock(monkeypatch) -> FakeTime:
    fake = FakeTime(1_900_000_000.0)
    monkeypatch.setattr(policy_module, "time", fake.module())
    return fake


def _agent(broker: ConnectedBroker, db_id: int) -> tuple[ConnectedPolicy, list]:
    key = f"connected-{db_id}"
    jobs = plan_matches([key, "random"], get_spec(ENV), 1, seed=db_id)
    return ConnectedPolicy(key, db_id, ENV, broker, GRACE), jobs


def _ask(policy: ConnectedPolicy, jobs: list):
    """One decision row of the agent's match; the engine's collector of its answer."""
    mask = np.ones((1, 7), dtype=bool)
    rng = MatchRng(np.array([jobs[0].seed]), np.array([0]), np.array([0]))
    return policy.submit(np.zeros((1, 6, 7, 2), dtype=np.int8), mask, rng)


def test_a_batch_of_offline_agents_waits_one_grace_not_one_per_agent(broker, clock):
    agents = [_agent(broker, 100 + i) for i in range(3)]
    for policy, jobs in agents:  # the batch binds every match before it plays
        policy.bind_matches(jobs)
    for policy, jobs in agents:
        result = _ask(policy, jobs)()
        assert result.codes.tolist() == [DISCONNECTED]
    assert clock.slept == pytest.approx(GRACE.grace_s)


def test_an_agent_dropped_longer_than_the_grace_ago_is_offline_at_once(broker, clock):
    policy, jobs = _agent(broker, 200)
    broker.client.set(broker.keys.connected_seen(200), clock.start - 2 * GRACE.grace_s)
    assert _ask(policy, jobs)().codes.tolist() == [DISCONNECTED]
    assert clock.slept == 0.0


def test_a_person_connecting_after_the_game_was_claimed_gets_the_request(broker, clock):
    policy, jobs = _agent(broker, 300)
    policy.bind_matches(jobs)

    def connect() -> None:  # the browser's socket arrives while the policy waits
        if clock.t >= 5.0:
            broker.client.set(broker.keys.connected_online(300),
                              json.dumps({"conn": "c1", "since": clock.start, "text": False, "fence": 1}))

    clock.on_sleep = connect
    _ask(policy, jobs)
    assert 5.0 <= clock.slept < GRACE.grace_s
    assert broker.client.llen(broker.keys.connected_requests(300)) == 1  # the request went to the person
