"""The grace of a dropped connection runs from the drop, not from each request.

A batch holding many agents that went offline long ago (or never connected) must not wait
a grace for each of them in turn; an agent that dropped a moment ago is waited for until
its grace is over, and taken back if it returns. Real Redis; the policy's sleeps are
watched instead of timed.
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from arena.connected import policy as policy_module
from arena.connected.broker import ConnectedBroker
from arena.connected.policy import ConnectedPolicy
from arena.connected.time_controls import TimeControl
from arena.snapshots.keys import RedisKeys

AGENT = 7


@pytest.fixture
def broker(redis_url: str, redis_key_prefix: str):
    client = redis.Redis.from_url(redis_url)
    yield ConnectedBroker(client, RedisKeys(redis_key_prefix))
    client.close()


def _policy(broker: ConnectedBroker) -> ConnectedPolicy:
    return ConnectedPolicy("connected-x", AGENT, "connect_four-v3", broker, TimeControl(grace_s=30.0))


def _no_sleep(monkeypatch) -> list[float]:
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        raise AssertionError(f"waited {s:.2f}s for an agent whose grace is over")

    monkeypatch.setattr(policy_module.time, "sleep", sleep)
    return slept


def test_an_agent_never_connected_is_offline_at_once(broker, monkeypatch):
    _no_sleep(monkeypatch)
    assert _policy(broker)._await_presence() is None


def test_an_agent_dropped_longer_than_the_grace_ago_is_offline_at_once(broker, monkeypatch):
    broker.client.set(broker.keys.connected_seen(AGENT), time.time() - 31.0)
    _no_sleep(monkeypatch)
    assert _policy(broker)._await_presence() is None


def test_an_agent_that_just_dropped_is_waited_for_and_taken_back(broker, monkeypatch):
    broker.client.set(broker.keys.connected_seen(AGENT), time.time())
    slept: list[float] = []

    def sleep(s: float) -> None:  # the agent reconnects while the policy waits
        slept.append(s)
        broker.client.set(broker.keys.connected_online(AGENT),
                          json.dumps({"conn": "c2", "since": time.time(), "text": False, "fence": 2}))

    monkeypatch.setattr(policy_module.time, "sleep", sleep)
    presence = _policy(broker)._await_presence()
    assert slept and presence is not None and presence.conn == "c2"
