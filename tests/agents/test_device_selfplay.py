"""PPO self-play on the torch core (the GPU path, run here on the CPU): it plays, scores and learns."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents.catalog import make_policy
from agents.checkpoint_spec import make_spec
from agents.neural import NeuralPolicy
from agents.trainers.ppo_selfplay import PPOConfig, SelfPlayPPO
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from envs.registry import get_spec
from envs.tictactoe import TicTacToeCore
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ENV = "tictactoe-v3"


def config(device: str, **kwargs) -> PPOConfig:
    return PPOConfig(**{"num_envs": 256, "rollout_steps": 8, "hidden": [64, 64], "lr": 3e-3,
                        "seed": 1, "device": device, "torch_core": True, **kwargs})


@pytest.mark.parametrize("device", DEVICES)
def test_device_rollouts_score_games_against_each_opponent(device: str) -> None:
    names = ["random", "heuristic"]
    opponents = [make_policy(n, ENV) for n in names]
    trainer = SelfPlayPPO(TicTacToeCore(), config(device, lr=0.0),
                          pick_opponents=lambda rng, k: rng.integers(0, 2, size=k))
    assert trainer.device_boards is not None
    opps, scores = [], []
    for _ in range(3):
        stats = trainer.update(opponents)
        assert stats.env_steps == 256 * 8 and stats.games == len(stats.result_scores)
        assert stats.wins + stats.draws + stats.losses == stats.games > 0
        assert all(math.isfinite(x) for x in (stats.policy_loss, stats.value_loss, stats.entropy))
        opps.append(stats.result_opponents)
        scores.append(stats.result_scores)
    opps, scores = np.concatenate(opps), np.concatenate(scores)
    assert set(opps.tolist()) == {0, 1} and set(scores.tolist()) <= {0.0, 0.5, 1.0}
    # An untrained learner (lr 0): even against random, crushed by the heuristic.
    vs_random, vs_heuristic = scores[opps == 0].mean(), scores[opps == 1].mean()
    assert 0.35 < vs_random < 0.75 and vs_heuristic < 0.25, (vs_random, vs_heuristic)
    tensors = trainer.state_tensors()
    assert all(t.device.type == "cpu" for t in tensors.values())


def _win_rate(actor: torch.nn.Module, n: int = 200) -> float:
    spec = make_spec(ENV, "mlp", {"hidden": [64, 64]})
    policy = NeuralPolicy.from_module(actor, spec, temperature=0.0)
    opp = make_policy("random", ENV)
    jobs = plan_matches([policy.agent_id, opp.agent_id], get_spec(ENV), n, seed=5)
    recs = play_matches(ENV, jobs, {policy.agent_id: policy, opp.agent_id: opp})
    return sum(r.winner is not None and r.seats[r.winner] == policy.agent_id for r in recs) / n


def test_device_ppo_learns_tictactoe_against_random_and_a_frozen_snapshot() -> None:
    trainer = SelfPlayPPO(TicTacToeCore(), config("cpu"),
                          pick_opponents=lambda rng, k: rng.choice(2, size=k, p=[0.8, 0.2]))
    spec = make_spec(ENV, "mlp", {"hidden": [64, 64]})
    snapshot = NeuralPolicy.from_module(trainer.model.actor, spec)
    before = _win_rate(trainer.model.actor)
    for _ in range(20):
        stats = trainer.update([make_policy("random", ENV), snapshot])
    assert stats.games > 0 and trainer.total_steps == 20 * 256 * 8
    after = _win_rate(trainer.model.actor)
    assert after > max(0.7, before + 0.15), (before, after)
