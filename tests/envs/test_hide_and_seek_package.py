"""Hide-and-seek's one home: ids defined once (its imports go one way: tests/test_import_direction.py)."""

from __future__ import annotations

from envs.hide_and_seek import rules
from envs.registry import get_spec, make_env


def test_the_ids_are_the_rules_ones_everywhere() -> None:
    from agents import role_baselines
    from agents.hide_and_seek import model as hide_and_seek_model
    from envs.hide_and_seek.core_v1 import HideAndSeekV1Core

    assert (role_baselines.HS_NOOP, role_baselines.HS_GRAB, role_baselines.HS_LOCK) == (rules.NOOP, rules.GRAB,
                                                                                        rules.LOCK)
    assert hide_and_seek_model.ACTIONS == rules.ACTIONS and role_baselines.HS_MOVES is rules.MOVES
    assert rules.ROLES == get_spec("hide_and_seek-v1").roles == get_spec("hide_and_seek-v0").roles
    for env_id, v1 in (("hide_and_seek-v0", False), ("hide_and_seek-v1", True)):
        env = make_env(env_id)
        assert env.action_space(env.possible_agents[0]).n == rules.NUM_ACTIONS
        assert get_spec(env_id).obs_shapes[0] == (rules.obs_dim(v1=v1),)
    core = HideAndSeekV1Core(1)
    core.reset([0])
    obs = core.observe()
    assert obs[0, 0, rules.flat_index("is_hider")] == 1.0 and obs[0, 2, rules.flat_index("is_seeker")] == 1.0
