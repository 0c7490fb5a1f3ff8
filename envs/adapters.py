"""Env adapters that drop layers the match engine makes redundant.

PettingZoo's ``aec_to_parallel`` wrapper calls ``last()`` (a full observation) for
every agent before stepping it, and the order-enforcing / bounds-checking wrappers
re-check what the engine has already validated (the engine never passes an illegal
action to an env). :class:`DirectParallel` runs the same cycle as
``aec_to_parallel_wrapper.step`` on the unwrapped AEC env, without those extra
calls. ``tests/envs/test_adapters.py`` checks it yields identical trajectories.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.conversions import aec_to_parallel_wrapper


class DirectParallel:
    """Parallel API over an unwrapped AEC env, same semantics as ``aec_to_parallel``."""

    def __init__(self, aec_env: Any) -> None:
        self.aec_env = aec_env.unwrapped
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict | None = None):
        env = self.aec_env
        env.reset(seed=seed, options=options)
        self.agents = env.agents[:]
        obs = {a: env.observe(a) for a in env.agents if not (env.terminations[a] or env.truncations[a])}
        return obs, dict(**env.infos)

    def step(self, actions: dict[str, Any]):
        env = self.aec_env
        rewards: dict[str, float] = defaultdict(int)
        for agent in list(env.agents):
            env.step(actions[agent])
            for a in env.agents:
                rewards[a] += env.rewards[a]
        terminations, truncations = dict(**env.terminations), dict(**env.truncations)
        infos = dict(**env.infos)
        observations = {a: env.observe(a) for a in env.agents}
        while env.agents and (
            env.terminations[env.agent_selection] or env.truncations[env.agent_selection]
        ):
            env.step(None)
        self.agents = env.agents
        return observations, rewards, terminations, truncations, infos

    def close(self) -> None:
        self.aec_env.close()


def direct(env: Any) -> Any:
    """The fastest equivalent driver of a registered env for the engine.

    Parallel envs built by ``aec_to_parallel`` become :class:`DirectParallel`; AEC
    envs are unwrapped (the engine enforces order and legality itself). Native
    parallel envs are returned unchanged.
    """
    # isinstance, not hasattr: a wrapped AEC env that has not been reset yet raises on
    # ``agent_selection``, so probing for it silently skipped the fast path.
    if isinstance(env, aec_to_parallel_wrapper):
        return DirectParallel(env.aec_env)
    if isinstance(env, AECEnv):
        return env.unwrapped
    return env
