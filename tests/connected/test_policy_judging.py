"""How the engine's side of a connected agent judges an answer and keeps the clock, row by row,
on a simulated clock (no socket, no Redis): a row without an integer action is invalid, one
outside the mask illegal, and time past the request's budget comes out of every match's bank
(a match whose bank runs dry times out)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import arena.connected.policy as policy_module
from agents.policy import MatchRng
from arena.connected.broker import Presence
from arena.connected.policy import ConnectedPolicy, _judge
from arena.connected.time_controls import TimeControl
from arena.engine.guard import ILLEGAL, INVALID, OK, TIMEOUT
from arena.engine.records import MatchJob


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Broker:
    """Answers every request with ``answer`` after ``delay_s`` of the simulated clock."""

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.answer, self.delay_s, self.sent = clock, [], 0.0, []

    def presence_seen(self, agent_id):
        return Presence("conn", 0.0, False), None

    def presence(self, agent_id):
        return Presence("conn", 0.0, False)

    def send(self, agent_id, request_id, frame, rows, expires_at) -> None:
        self.sent.append(request_id)

    def wait_reply(self, request_id, timeout_s):
        self.clock.now += self.delay_s
        return {"id": request_id, "actions": list(self.answer)}

    def cancel(self, request_id) -> None:
        pass


@pytest.fixture
def agent(monkeypatch) -> tuple[ConnectedPolicy, _Broker, _Clock]:
    clock = _Clock()
    monkeypatch.setattr(policy_module, "time", types.SimpleNamespace(
        monotonic=clock.monotonic, time=clock.time, sleep=clock.sleep))
    broker = _Broker(clock)
    policy = ConnectedPolicy("wire", 5, "connect_four-v3", broker,  # type: ignore[arg-type]
                             TimeControl(act_timeout_s=2.0, overage_s=1.0, grace_s=1.0))
    policy.bind_matches([MatchJob(seed, ("wire", "random"), match_id=f"m{seed}") for seed in (10, 11, 12)])
    return policy, broker, clock


def _ask(policy: ConnectedPolicy, seeds: list[int]):
    k = len(seeds)
    mask = np.ones((k, 7), dtype=bool)
    mask[:, 6] = False
    obs = np.zeros((k, 6, 7, 2), dtype=np.int8)
    return policy.act(obs, mask, MatchRng(np.array(seeds), np.zeros(k, np.int64), np.zeros(k, np.int64)))


def test_an_answer_within_the_budget_leaves_the_banks(agent):
    policy, broker, _ = agent
    broker.answer, broker.delay_s = [0, 3, 5], 1.5
    res = _ask(policy, [10, 11, 12])
    assert res.actions.tolist() == [0, 3, 5] and res.codes.tolist() == [OK] * 3
    assert policy._bank == {"m10": 1.0, "m11": 1.0, "m12": 1.0}


def test_time_past_the_budget_comes_out_of_every_bank_of_the_request(agent):
    policy, broker, _ = agent
    broker.answer, broker.delay_s = [1, 2], 2.75
    assert _ask(policy, [10, 11]).codes.tolist() == [OK, OK]
    assert policy._bank == {"m10": 0.25, "m11": 0.25, "m12": 1.0}
    broker.answer, broker.delay_s = [1, 2, 4], 2.5
    res = _ask(policy, [10, 11, 12])
    assert res.codes.tolist() == [TIMEOUT, TIMEOUT, OK]
    assert "used up the overage time" in res.detail
    assert policy._bank == {"m10": -0.25, "m11": -0.25, "m12": 0.5}


@pytest.mark.parametrize(("answer", "codes", "actions"), [
    ([0, 5, 3], [OK, OK, OK], [0, 5, 3]),
    ([0, None, 3], [OK, INVALID, OK], [0, -1, 3]),
    ([0, 1.0, 3], [OK, INVALID, OK], [0, -1, 3]),
    ([True, 6, 9], [OK, ILLEGAL, ILLEGAL], [1, 6, 9]),
    ([-1, 2, "4"], [ILLEGAL, OK, INVALID], [-1, 2, -1]),
    ([[1], [2], [3]], [INVALID] * 3, [-1] * 3),
])
def test_every_row_of_an_answer_is_judged_alone(answer, codes, actions):
    mask = np.ones((3, 7), dtype=bool)
    mask[:, 6] = False
    res = _judge(answer, mask, np.ones(3), "wire")
    assert res.codes.tolist() == codes and res.actions.tolist() == actions


@pytest.mark.parametrize("answer", [[1, 2], "123", None])
def test_an_answer_without_one_action_per_row_forfeits_every_row(answer):
    res = _judge(answer, np.ones((3, 7), dtype=bool), np.ones(3), "wire")
    assert res.codes.tolist() == [INVALID] * 3
