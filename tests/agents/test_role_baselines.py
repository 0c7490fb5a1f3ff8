"""Scripted baselines of the role envs: legal, and stronger than random in their role."""

from __future__ import annotations

import numpy as np
import pytest

from agents.catalog import make_policy
from agents.policy import MatchRng
from agents.role_baselines import ROLE_BASELINES, baseline_role
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from envs.errors import UnknownAgent
from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.rules import NUM_ACTIONS
from envs.registry import get_spec


def _team0_wins(env_id: str, first: str, second: str, n: int) -> int:
    policies = {p.agent_id: p for p in (make_policy(first, env_id), make_policy(second, env_id))}
    jobs = plan_matches([first, second], get_spec(env_id), n, seed=3)
    return sum(r.winner == 0 for r in play_matches(env_id, jobs, policies))


def test_simple_tag_chaser_and_evader_beat_random_in_their_roles() -> None:
    assert _team0_wins("simple_tag-v3", "chaser", "random", 40) >= 30  # random predators: ~20%
    assert _team0_wins("simple_tag-v3", "random", "evader", 40) <= 8


def test_rps_counter_beats_a_fixed_move_and_fixed_moves_cycle() -> None:
    # Symmetric: plan_matches plays both seat orders; team 0 is the first agent half the time.
    assert _team0_wins("rps-v2", "paper", "rock", 10) == 5
    assert _team0_wins("rps-v2", "counter", "scissors", 10) == 5


def _door_block_rate(hider: str, episodes: int = 120) -> float:
    """Share of one-door layouts whose door holds a box when preparation ends."""
    core = HideAndSeekCore(episodes, HideAndSeekConfig(n_doors=1))  # v0's defaults, one door
    obs, mask = core.reset(np.arange(episodes))
    policies = (make_policy(hider, "hide_and_seek-v0"), make_policy("chaser", "hide_and_seek-v0"))
    for t in range(core.prep_steps):
        actions = np.zeros((episodes, core.n_agents), dtype=np.int64)
        for team, policy in enumerate(policies):
            cols = np.flatnonzero(core.team == team)
            o, m = obs[:, cols].reshape(-1, core.obs_dim), mask[:, cols].reshape(-1, NUM_ACTIONS)
            k = o.shape[0]
            actions[:, cols] = policy.act(o, m, MatchRng(np.arange(k), np.full(k, team), np.full(k, t))).reshape(
                episodes, -1)
        obs, _, _, mask = core.step(actions)
    return float(core.door_block_status(locked=True).mean())


def test_box_hider_pushes_a_box_into_the_door_and_locks_it() -> None:
    assert _door_block_rate("random") == 0.0
    assert _door_block_rate("box-hider") >= 0.2


@pytest.mark.parametrize(("env_id", "name", "role"), [
    ("hide_and_seek-v0", "chaser:epsilon=0.3", "seeker"), ("hide_and_seek-v0", "box-hider", "hider"),
    ("simple_tag-v3", "chaser", "predator"), ("simple_tag-v3", "evader", "prey"), ("rps-v2", "rock", None),
    ("tictactoe-v3", "heuristic", None)])
def test_baselines_know_their_role(env_id: str, name: str, role: str | None) -> None:
    assert baseline_role(env_id, name) == role


def test_every_role_baseline_builds_and_bad_parameters_say_what_to_fix() -> None:
    for env_id, names in ROLE_BASELINES.items():
        for name in names:
            assert make_policy(f"{name}:epsilon=0.5", env_id).agent_id == f"{name}:epsilon=0.5"
    with pytest.raises(UnknownAgent, match="epsilon"):
        make_policy("chaser:speed=2", "simple_tag-v3")
    with pytest.raises(UnknownAgent, match="chaser"):
        make_policy("chaser", "connect_four-v3")
