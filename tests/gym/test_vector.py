"""arena.gym.make_vec: the vector core plays exactly the single envs' episodes; masks; autoreset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arena.gym
from arena.gym import ArenaVectorEnv, MaskedSyncVectorEnv

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("env_id", "opponents"), [
    ("connect_four-v3", ["random"]),
    ("tictactoe-v3", ["heuristic:epsilon=0.3", "random"]),
])
def test_vector_env_agrees_with_single_envs_step_by_step(env_id, opponents):
    """Same seeds, same learner actions (illegal ones included): same observations, rewards,
    ends and masks as Gymnasium's SyncVectorEnv of single PettingZoo-backed envs."""
    n = 12
    vec = arena.gym.make_vec(env_id, n, opponents=opponents)
    sync = arena.gym.make_vec(env_id, n, opponents=opponents, vectorized=False)
    assert isinstance(vec, ArenaVectorEnv) and isinstance(sync, MaskedSyncVectorEnv)
    assert vec.single_observation_space == sync.single_observation_space
    obs_v, info_v = vec.reset(seed=5)
    obs_s, info_s = sync.reset(seed=5)
    assert (obs_v == obs_s).all() and (info_v["action_mask"] == info_s["action_mask"]).all()
    rng = np.random.default_rng(0)
    ended = illegal = 0
    for t in range(250):
        mask = vec.action_masks()
        assert (mask == sync.action_masks()).all()
        actions = (rng.random(mask.shape) * mask).argmax(1)
        if t % 23 == 0:
            row = t % n  # now and then an illegal move: an occupied square/full column, or out of range
            actions[row] = np.flatnonzero(~mask[row])[0] if not mask[row].all() else mask.shape[1]
        out_v, out_s = vec.step(actions), sync.step(actions)
        for got, want in zip(out_v[:4], out_s[:4]):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(out_v[4]["action_mask"], out_s[4]["action_mask"])
        ended += int(out_v[2].sum())
        illegal += int(out_v[4]["illegal_action"].sum())
    assert ended > 50 and illegal > 0
    assert set(np.unique(np.concatenate([vec.step(vec.action_masks().argmax(1))[1] for _ in range(60)]))) >= {-1, 1}


def test_vector_env_autoresets_on_the_next_step_and_masks_ended_boards_all_true():
    vec = arena.gym.make_vec("tictactoe-v3", 4, opponents=["heuristic"], seed=0)
    obs, info = vec.reset()
    assert obs.shape == (4, 3, 3, 2) and info["action_mask"].shape == (4, 9)
    while True:
        _, _, terminated, _, _ = vec.step(vec.action_masks().argmax(1))
        if terminated.any():
            break
    done = np.flatnonzero(terminated)
    assert vec.action_masks()[done].all()
    obs, reward, terminated, _, _ = vec.step(np.zeros(4, dtype=np.int64))  # ignored on the ended boards
    assert (reward[done] == 0).all() and not terminated[done].any()
    assert (np.abs(obs[done]).sum(axis=(1, 2, 3)) <= 1).all()  # a fresh board (the opponent may have moved)


def test_make_vec_falls_back_to_sync_envs_without_a_core():
    envs = arena.gym.make_vec("rps-v2", 3, opponents=["rock"], seed=0)
    assert isinstance(envs, MaskedSyncVectorEnv)
    envs.reset()
    assert envs.action_masks().shape == (3, 3)
    with pytest.raises(ValueError, match="no vectorized board core"):
        ArenaVectorEnv("rps-v2", 3)


def test_benchmark_smoke_mode_prints_its_json_keys():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gym.py"), "--smoke"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"vec_steps_per_s", "sync_steps_per_s", "ratio", "env", "num_envs"} <= result.keys()
    assert result["vec_steps_per_s"] > 0 and result["sync_steps_per_s"] > 0


def test_win_rate_scores_wins_draws_and_illegal_moves():
    paper, rock = (lambda obs, mask, k=k: np.full(len(mask), k) for k in (1, 0))
    assert arena.gym.win_rate(paper, "rps-v2", ["rock"], episodes=16, num_envs=4) == 1.0  # paper beats rock
    assert arena.gym.win_rate(rock, "rps-v2", ["rock"], episodes=16, num_envs=4) == 0.5  # draws count half
    illegal = arena.gym.win_rate(lambda obs, mask: (~mask).argmax(1), "tictactoe-v3", ["random"], episodes=32)
    assert illegal == 0.0  # an illegal move loses
    first_legal = [arena.gym.win_rate(lambda obs, mask: mask.argmax(1), "tictactoe-v3", ["random"], episodes=64,
                                      seed=3) for _ in range(2)]
    assert first_legal[0] == first_legal[1] and 0.0 < first_legal[0] < 1.0  # seeded: the same episodes
