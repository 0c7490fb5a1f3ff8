"""Smoke test of PPO self-play on a tiny budget: it runs, exports, and learns something."""

from __future__ import annotations

import math

import numpy as np
import torch

from agents.catalog import make_policy
from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.checkpoint_spec import make_spec
from agents.neural import NeuralPolicy
from agents.trainers.ppo_selfplay import PPOConfig, SelfPlayPPO
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from envs.registry import get_spec
from envs.tictactoe import TicTacToeCore

ENV = "tictactoe-v3"


def _win_rate(policy, opponent: str, n: int = 200) -> float:
    opp = make_policy(opponent, ENV)
    jobs = plan_matches([policy.agent_id, opp.agent_id], get_spec(ENV), n, seed=5)
    recs = play_matches(ENV, jobs, {policy.agent_id: policy, opp.agent_id: opp})
    return sum(r.winner is not None and r.seats[r.winner] == policy.agent_id for r in recs) / n


def test_ppo_learns_tictactoe_against_random_and_exports_an_arena_agent(tmp_path):
    torch.set_num_threads(1)
    cfg = PPOConfig(num_envs=256, rollout_steps=8, hidden=[64, 64], lr=3e-3, seed=1)
    trainer = SelfPlayPPO(TicTacToeCore(), cfg)
    opponents = [make_policy("random", ENV)]
    spec = make_spec(ENV, "mlp", {"hidden": [64, 64]})
    before = _win_rate(NeuralPolicy.from_module(trainer.model.actor, spec, temperature=0.0), "random")
    for _ in range(25):
        stats = trainer.update(opponents)
        assert math.isfinite(stats.policy_loss) and math.isfinite(stats.value_loss)
    assert stats.games > 0 and stats.env_steps == 256 * 8
    path = save_checkpoint(trainer.model.actor, spec, tmp_path / "learner.safetensors")
    policy = NeuralPolicy(load_checkpoint(path), temperature=0.0)
    after = _win_rate(policy, "random")
    assert after > max(0.75, before + 0.15), (before, after)
    # The exported weights are a copy: training on does not change the saved agent.
    trainer.update(opponents)
    again = NeuralPolicy(load_checkpoint(path), temperature=0.0)
    obs = np.zeros((1, 3, 3, 2), dtype=np.int8)
    assert np.array_equal(policy.logits(obs), again.logits(obs))
