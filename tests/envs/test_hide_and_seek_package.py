"""Hide-and-seek's one home: ids defined once, one config object per version.

Its imports go one way: tests/test_import_direction.py.
"""

from __future__ import annotations

import pytest

from envs.hide_and_seek import rules
from envs.hide_and_seek.config import HideAndSeekConfig, HideAndSeekV1Config
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.device.core_v1 import TorchHideAndSeekV1Core
from envs.registry import get_spec, make_env


def test_the_ids_are_the_rules_ones_everywhere() -> None:
    from agents import role_baselines

    assert (role_baselines.HS_NOOP, role_baselines.HS_GRAB, role_baselines.HS_LOCK) == (rules.NOOP, rules.GRAB,
                                                                                        rules.LOCK)
    assert role_baselines.HS_MOVES is rules.MOVES
    assert rules.ROLES == get_spec("hide_and_seek-v1").roles == get_spec("hide_and_seek-v0").roles
    for env_id, v1 in (("hide_and_seek-v0", False), ("hide_and_seek-v1", True)):
        env = make_env(env_id)
        assert env.action_space(env.possible_agents[0]).n == rules.NUM_ACTIONS
        assert get_spec(env_id).obs_shapes[0] == (rules.obs_dim(v1=v1),)
    core = HideAndSeekV1Core(1)
    core.reset([0])
    obs = core.observe()
    assert obs[0, 0, rules.flat_index("is_hider")] == 1.0 and obs[0, 2, rules.flat_index("is_seeker")] == 1.0


def test_one_config_per_version_for_the_cores_the_envs_and_the_registry() -> None:
    for env_id, config_type in (("hide_and_seek-v0", HideAndSeekConfig), ("hide_and_seek-v1", HideAndSeekV1Config)):
        assert config_type(**get_spec(env_id).kwargs) == config_type()  # the registered settings are the defaults
        assert make_env(env_id, n_doors=1).core.config == config_type(n_doors=1)
    config = HideAndSeekV1Config(n_boxes=1, n_ramps=2, layout="random")
    core = HideAndSeekV1Core(1, config)
    assert core.config is config and (core.n_real_boxes, core.n_boxes) == (1, 3)  # ramps are objects after the boxes
    assert TorchHideAndSeekV1Core(2, config).config is config
    with pytest.raises(TypeError, match="HideAndSeekV1Core takes a HideAndSeekV1Config"):
        HideAndSeekV1Core(1, HideAndSeekConfig())
    with pytest.raises(TypeError, match="HideAndSeekCore takes a HideAndSeekConfig"):
        HideAndSeekCore(1, HideAndSeekV1Config())
    with pytest.raises(ValueError, match="seekers_by_door"):
        HideAndSeekV1Core(1, HideAndSeekV1Config(seekers_by_door=True))
