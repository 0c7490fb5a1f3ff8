"""``envs.adapters``: the engine's fast drivers must behave exactly like PettingZoo's."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from pettingzoo.classic import rps_v2
from pettingzoo.test.example_envs import generated_agents_parallel_v0
from pettingzoo.utils.conversions import aec_to_parallel_wrapper

from envs.adapters import DirectParallel, direct
from envs.registry import list_envs, make_env

SPECS = {spec.env_id: spec for spec in list_envs()}


@pytest.mark.parametrize("env_id", [i for i in SPECS if SPECS[i].api == "aec"])
def test_direct_unwraps_a_fresh_aec_env(env_id: str) -> None:
    """Regression: before reset, a wrapped AEC env was returned still wrapped."""
    env = make_env(env_id)
    driver = direct(env)
    assert driver is env.unwrapped and driver is not env


def test_direct_keeps_native_parallel_envs() -> None:
    env = generated_agents_parallel_v0.parallel_env()
    assert direct(env) is env


PARALLEL_BUILDERS = {
    **{i: (lambda i=i: make_env(i)) for i in SPECS if SPECS[i].api == "parallel"},
    "rps_v2.parallel_env": lambda: rps_v2.parallel_env(max_cycles=15),
}


@pytest.mark.parametrize("name", PARALLEL_BUILDERS)
def test_direct_parallel_matches_aec_to_parallel(name: str) -> None:
    """Same seeds and actions: identical observations, rewards, ends and agents."""
    reference = PARALLEL_BUILDERS[name]()
    if not isinstance(reference, aec_to_parallel_wrapper):
        pytest.skip(f"{name} is a native parallel env; direct() returns it unchanged")
    fast = direct(PARALLEL_BUILDERS[name]())
    assert isinstance(fast, DirectParallel)
    rng = np.random.default_rng(3)
    steps = 0
    for episode in range(3):
        ref_out, fast_out = reference.reset(seed=episode), fast.reset(seed=episode)
        assert data_equivalence(ref_out, fast_out)
        while reference.agents:
            assert fast.agents == reference.agents
            actions = {a: int(rng.integers(reference.action_space(a).n)) for a in reference.agents}
            ref_out, fast_out = reference.step(actions), fast.step(dict(actions))
            for what, r, f in zip(
                ("obs", "rewards", "terms", "truncs", "infos"), ref_out, fast_out
            ):
                assert data_equivalence(dict(r), dict(f)), f"{name}: {what} at step {steps}"
            steps += 1
        assert fast.agents == []
    assert steps > 30
