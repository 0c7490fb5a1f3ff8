"""Smoke tests of hide-and-seek PPO on a tiny budget: it trains, freezes generations,
saves checkpoints that load as arena agents of the right role, and reports a section."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents.checkpoint import load_checkpoint
from agents.neural import NeuralPolicy
from agents.trainers.hide_and_seek.generations import train_generations
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from arena.training.hide_and_seek.evaluation import rate_generations
from benchmarks.support.hide_and_seek_learning import hide_and_seek_section
from envs.registry import get_spec

ENV = "hide_and_seek-v0"
TINY = {"num_envs": 32, "hidden": [32, 32], "minibatches": 4, "updates_per_generation": 2}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_updates_are_finite_and_generations_are_copies() -> None:
    trainer = HideAndSeekPPO(HideAndSeekPPOConfig(**TINY, past_opponent_share=0.5))
    for _ in range(3):
        stats = trainer.update()
        assert stats.env_steps == 32 * 60
        for role in ("hider", "seeker"):
            assert all(math.isfinite(x) for x in stats.losses[role]), stats.losses
        assert 0.0 <= stats.door_block_rate <= 1.0
        trainer.freeze()  # later updates meet past generations too
    assert trainer.total_steps == 3 * 32 * 60 and len(trainer.generations) == 4
    frozen = trainer.generations[1]["hider"]
    live = trainer.models["hider"].actor.state_dict()
    assert not all(torch.equal(frozen[k], live[k]) for k in live)  # trained on since
    assert any(not torch.equal(trainer.generations[0]["seeker"][k], v)
               for k, v in trainer.models["seeker"].actor.state_dict().items())


def test_generations_are_saved_as_arena_agents_and_play_in_the_engine(tmp_path) -> None:
    cfg = HideAndSeekPPOConfig(**TINY, box_by_door=True)
    seen = []
    trainer, reports = train_generations(cfg, 1.0, tmp_path, eval_episodes=16, max_updates=3,
                                         on_generation=seen.append)
    assert [r.generation for r in reports] == [0, 1, 2] and seen == reports
    assert [r.updates for r in reports] == [0, 2, 3]
    for r in reports:
        assert 0.0 <= r.door_block_rate <= 1.0 and 0.0 <= r.door_block_rate_v0 <= 1.0
        assert r.door_lock_rate <= r.door_block_rate
        pairs = {(h, s) for h, s, _ in r.matches}
        assert pairs == ({(0, 0)} if r.generation == 0 else
                         {(r.generation, r.generation), (r.generation, r.generation - 1),
                          (r.generation - 1, r.generation)})
        assert len(r.matches) == 16 * len(pairs)
    policies = {}
    for role in ("hider", "seeker"):
        ckpt = load_checkpoint(reports[-1].paths[role])
        assert ckpt.spec.role == role and ckpt.spec.env == ENV
        assert ckpt.spec.obs_shape == (493,) and ckpt.spec.hparams["hidden"] == [32, 32]
        saved = trainer.generations[2][role]
        assert all(torch.equal(ckpt.state_dict[k], saved[k]) for k in saved)
        policies[role] = NeuralPolicy(ckpt)
    hider, seeker = policies["hider"], policies["seeker"]
    jobs = plan_matches([hider.agent_id, seeker.agent_id], get_spec(ENV), 4, seed=3)
    records = play_matches(ENV, jobs, {hider.agent_id: hider, seeker.agent_id: seeker})
    for rec in records:
        assert rec.termination == "normal", rec.detail
        assert rec.seats == [hider.agent_id] * 2 + [seeker.agent_id] * 2
        assert rec.winner in (0, 1, None) and len(rec.actions) == 4 * 60


def test_rate_generations_orders_a_stronger_generation_first() -> None:
    # Generation 1's hiders always beat generation 0's seekers, which beat gen 0's hiders.
    matches = [(0, 0, 1)] * 20 + [(1, 0, 0)] * 20 + [(1, 1, -1)] * 10
    hiders, seekers = rate_generations(matches, 3)
    assert hiders[1].mu > hiders[0].mu and seekers[0].mu > hiders[0].mu
    assert hiders[2] == seekers[2] and hiders[2].mu == 25.0  # never played: the prior


def test_section_reports_every_key_with_sane_types() -> None:
    cfg = HideAndSeekPPOConfig(**TINY)
    out = hide_and_seek_section(minutes=10.0, config=cfg, target_generations=2,  # max_updates ends it
                                eval_episodes=16, max_updates=3)
    assert isinstance(out["hs_generations"], int) and out["hs_generations"] >= 2
    for key in ("hs_door_block_rate_first", "hs_door_block_rate_last", "hs_env_steps_per_s"):
        assert isinstance(out[key], float) and math.isfinite(out[key]), key
    assert 0.0 <= out["hs_door_block_rate_first"] <= 1.0
    assert out["hs_env_steps_per_s"] > 0 and out["hs_env_steps"] == 3 * 32 * 60
    for key in ("hs_hider_ratings", "hs_seeker_ratings", "hs_door_block_rates"):
        assert len(out[key]) == out["hs_generations"], key
        assert all(isinstance(x, float) and math.isfinite(x) for x in out[key]), key
    assert out["hs_door_block_rates"][-1] == out["hs_door_block_rate_last"]
    assert np.std(out["hs_hider_ratings"] + out["hs_seeker_ratings"]) > 0  # matches were rated
