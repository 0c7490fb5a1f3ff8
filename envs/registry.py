"""Registry of versioned environment ids.

The built-in games are declared in :mod:`envs.builtin` (plain data) and registered here
when this module loads; third-party PettingZoo envs (AEC or parallel) are registered by
import path::

    register_env("my_game-v0", "my_pkg.my_module:env", spec=...)

If ``spec`` is omitted it is inferred from the env: every PettingZoo agent is a seat
and its own team with role ``player``, outcome ``higher_score``.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from typing import Any

import gymnasium
import numpy as np
import pettingzoo

from envs.builtin import BUILTIN_ENV_IDS, BUILTIN_ENVS
from envs.errors import UnknownEnv
from envs.spec import EnvEntry, EnvSpec

ENV_ID = re.compile(r"^[A-Za-z0-9_]+-v\d+$")

_REGISTRY: dict[str, EnvEntry] = {entry.spec.env_id: entry for entry in BUILTIN_ENVS}


def load_object(path: str) -> Any:
    """Import ``"pkg.module:attr"`` and return the attribute."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"entry point {path!r} must look like 'package.module:attribute'")
    return getattr(importlib.import_module(module_name), attr)


def register_env(
    env_id: str,
    entry_point: str,
    spec: EnvSpec | None = None,
    *,
    vector_core: str | None = None,
    kwargs: dict | None = None,
) -> EnvSpec:
    """Register an environment under a versioned id.

    Args:
        env_id: Versioned id such as ``my_game-v0``.
        entry_point: ``"pkg.module:factory"`` returning a PettingZoo AEC or parallel env.
        spec: Seats, teams, roles and outcome rule; inferred from the env when omitted.
        vector_core: Optional ``"pkg.module:Class"`` of a vectorized core.
        kwargs: Constructor keyword arguments (used when inferring the spec).

    Returns:
        The registered spec.

    Raises:
        ValueError: A malformed id or entry point, or (when inferring the spec) an env
            whose seats do not share one discrete action space.
        TypeError: The entry point does not build a PettingZoo AEC or parallel env.
    """
    if not ENV_ID.match(env_id):
        raise ValueError(f"env id {env_id!r} must look like 'name-v<version>', e.g. 'my_game-v0'")
    if spec is None:
        spec = infer_spec(env_id, entry_point, kwargs or {})
    elif spec.env_id != env_id:
        spec = replace(spec, env_id=env_id)
    _REGISTRY[env_id] = EnvEntry(spec=spec, entry_point=entry_point, vector_core=vector_core)
    return spec


def infer_spec(env_id: str, entry_point: str, kwargs: dict) -> EnvSpec:
    """Build a default spec by instantiating the env once."""
    env = load_object(entry_point)(**kwargs)
    # isinstance, not duck typing: a wrapped AEC env has no ``agent_selection``
    # before reset, so probing attributes misread every wrapped AEC env as parallel.
    if isinstance(env, pettingzoo.ParallelEnv):
        api = "parallel"
    elif isinstance(env, pettingzoo.AECEnv):
        api = "aec"
    else:
        raise TypeError(
            f"{env_id}: {entry_point} returned {type(env).__name__}, "
            "not a PettingZoo AECEnv or ParallelEnv"
        )
    try:
        agents = tuple(env.possible_agents)
        act_space = env.action_space(agents[0])
        if not isinstance(act_space, gymnasium.spaces.Discrete):
            # ValueError: the space follows from constructor kwargs (continuous_actions=True).
            raise ValueError(  # noqa: TRY004
                f"{env_id}: only discrete action spaces are supported, got {act_space}"
            )
        sizes = {getattr(env.action_space(agent), "n", None) for agent in agents}
        if len(sizes) != 1:
            raise ValueError(
                f"{env_id}: every seat must have the same Discrete action space; "
                "pass an explicit spec for games with per-seat action spaces"
            )
        shapes = []
        for agent in agents:
            space = env.observation_space(agent)
            if isinstance(space, gymnasium.spaces.Dict):
                space = space["observation"]
            shapes.append(tuple(space.shape or ()))
    finally:
        env.close()
    return EnvSpec(
        env_id=env_id,
        seats=agents,
        teams=tuple((i,) for i in range(len(agents))),
        roles=("player",) * len(agents),
        num_actions=int(act_space.n),
        obs_shapes=tuple(shapes),
        api=api,
        kwargs=dict(kwargs),
    )


def get_entry(env_id: str) -> EnvEntry:
    """Look up a registered env; raises :class:`UnknownEnv` with the known ids."""
    try:
        return _REGISTRY[env_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownEnv(f"unknown env {env_id!r}; registered envs: {known}") from None


def get_spec(env_id: str) -> EnvSpec:
    return get_entry(env_id).spec


def list_registered() -> tuple[str, ...]:
    """Ids registered so far (the built-ins and any registered since), sorted."""
    return tuple(sorted(_REGISTRY))


def builtin_env_ids() -> tuple[str, ...]:
    """The ids of the envs Arena ships with (:mod:`envs.builtin`), sorted."""
    return BUILTIN_ENV_IDS


def list_envs() -> list[EnvSpec]:
    return [_REGISTRY[k].spec for k in sorted(_REGISTRY)]


def make_env(env_id: str, **overrides: Any) -> Any:
    """Instantiate a fresh PettingZoo env (AEC or parallel, as registered)."""
    entry = get_entry(env_id)
    kwargs = {**entry.spec.kwargs, **overrides}
    return load_object(entry.entry_point)(**kwargs)


def make_vector_core(env_id: str) -> Any | None:
    """The vectorized core instance for ``env_id``, or ``None`` if it has none."""
    entry = get_entry(env_id)
    if entry.vector_core is None:
        return None
    return load_object(entry.vector_core)()


def flat_obs(obs: Any) -> np.ndarray:
    """The observation array of a PettingZoo observation (unwrapping action-mask dicts)."""
    if isinstance(obs, dict) and "observation" in obs:
        obs = obs["observation"]
    return np.asarray(obs)
