"""examples/connect_four_negamax.py: a search agent that beats the scripted heuristic, in process."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

from agents.catalog import make_policy
from agents.policy import MatchRng
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from envs.registry import get_spec
from tests.client.live import REPO_ROOT

ENV = "connect_four-v3"


def load_example(name: str):
    path = REPO_ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class ExamplePolicy:
    """The example's batched ``act`` as an engine :class:`~agents.policy.Policy`, checking every answer."""

    agent_id = "negamax-example"
    weights_hash = None

    def __init__(self, act) -> None:
        self._act = act
        self.rows = 0
        self.illegal = 0

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        actions = np.asarray(self._act(obs, mask), dtype=np.int64)
        assert actions.shape == (len(mask),)
        self.rows += len(mask)
        self.illegal += int((~mask[np.arange(len(mask)), actions]).sum())
        return actions


def test_negamax_example_beats_the_heuristic_and_plays_only_legal_moves():
    example = load_example("connect_four_negamax")
    assert example.act.arena_batched  # marked @arena.client.connected.batched: arena connect needs no flag
    policy = ExamplePolicy(example.act)
    jobs = plan_matches([policy.agent_id, "heuristic"], get_spec(ENV), 12, seed=5)
    with MatchEngine(time_budget_s=None) as engine:  # a loaded CI core must not turn slowness into forfeits
        records = engine.play(ENV, jobs, {policy.agent_id: policy, "heuristic": make_policy("heuristic", ENV)})
    assert [r.termination for r in records] == ["normal"] * 12
    assert policy.illegal == 0 and policy.rows > 12 * 3
    assert {r.seats[0] for r in records} == {policy.agent_id, "heuristic"}  # both seats
    wins = sum(r.winner is not None and r.seats[r.winner] == policy.agent_id for r in records)
    assert wins >= 10, [(r.seats, r.winner) for r in records]


def test_negamax_takes_a_win_and_blocks_one():
    example = load_example("connect_four_negamax")
    obs = np.zeros((6, 7, 2), dtype=np.int8)
    obs[5, 0:3, 0] = 1  # three of its own on the bottom row; the opponent's three above
    obs[4, 0:3, 1] = 1
    assert example.choose(obs, np.ones(7, dtype=bool)) == 3
    obs = np.zeros((6, 7, 2), dtype=np.int8)
    obs[3:6, 6, 1] = 1  # the opponent's three in column 6
    obs[5, 0:2, 0] = 1
    assert example.choose(obs, np.ones(7, dtype=bool)) == 6
