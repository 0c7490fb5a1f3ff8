"""PettingZoo's own conformance tests over every registered env.

Parametrized over ``list_envs()`` at collection time, so a newly registered env is
covered without touching this file. AEC envs get ``api_test`` and ``seed_test``;
parallel envs get ``parallel_api_test`` and ``parallel_seed_test``.
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from envs.registry import flat_obs, list_envs, make_env, make_vector_core

SPECS = {spec.env_id: spec for spec in list_envs()}
ENV_IDS = sorted(SPECS)
CORE_IDS = [i for i in ENV_IDS if make_vector_core(i) is not None]
CONFORMANCE = {  # a spec's api -> (the env's class, PettingZoo's api test, its seed test)
    "aec": (AECEnv, api_test, seed_test),
    "parallel": (ParallelEnv, parallel_api_test, parallel_seed_test),
}


def test_every_env_is_covered() -> None:
    assert {SPECS[i].api for i in ENV_IDS} <= set(CONFORMANCE)
    assert {"connect_four-v3", "tictactoe-v3", "rps-v2", "simple_tag-v3"} <= set(ENV_IDS)
    assert {"connect_four-v3", "tictactoe-v3"} <= set(CORE_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api(env_id: str) -> None:
    env_class, conformance, _ = CONFORMANCE[SPECS[env_id].api]
    env = make_env(env_id)
    assert isinstance(env, env_class)
    conformance(env)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_seed(env_id: str) -> None:
    _, _, seeded = CONFORMANCE[SPECS[env_id].api]
    seeded(functools.partial(make_env, env_id))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spec_describes_the_env(env_id: str) -> None:
    """Seats, action count and observation shapes in the spec are the env's own."""
    spec = SPECS[env_id]
    env = make_env(env_id)
    assert tuple(env.possible_agents) == spec.seats
    for seat, shape in zip(spec.seats, spec.obs_shapes):
        action_space = env.action_space(seat)
        assert isinstance(action_space, gymnasium.spaces.Discrete)
        assert action_space.n == spec.num_actions
        obs_space = env.observation_space(seat)
        if isinstance(obs_space, gymnasium.spaces.Dict):
            obs_space = obs_space["observation"]
        assert tuple(obs_space.shape or ()) == shape
    if spec.api == "aec":
        env.reset(seed=0)
        observations = {seat: env.observe(seat) for seat in spec.seats}
    else:
        observations, _ = env.reset(seed=0)
    for seat, shape in zip(spec.seats, spec.obs_shapes):
        assert flat_obs(observations[seat]).shape == shape
    env.close()


@pytest.mark.parametrize("env_id", CORE_IDS)
def test_vector_core_matches_spec(env_id: str) -> None:
    spec = SPECS[env_id]
    core = make_vector_core(env_id)
    assert core.env_id == env_id
    assert core.num_actions == spec.num_actions
    assert all(core.obs_shape == shape for shape in spec.obs_shapes)
    assert core.shape[0] * core.shape[1] == spec.step_limit
    obs, mask = core.observe(core.new_batch(3), np.arange(3))
    assert obs.shape == (3, *spec.obs_shapes[0]) and mask.shape == (3, spec.num_actions)
