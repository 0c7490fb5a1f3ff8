"""Probe observations: what a role really sees, collected from random legal play.

A submitted ONNX graph is run once on such a batch before it is accepted. Real
observations rather than noise, so that a model that is only defined on the inputs
the env produces (a ``Log`` of a board count, say) is not refused for NaNs on inputs
it will never get. Seeded: the same env, role and seed give the same batch.
:func:`run_probes` runs them in a sandboxed worker and turns what goes wrong into a
refusal that says what to fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.onnx_agents.process import OnnxRunError, SandboxTimeout
from agents.onnx_agents.sandbox import Lease, SandboxedModel
from envs.errors import InvalidSubmission
from envs.registry import flat_obs, get_spec, make_env
from envs.spec import EnvSpec

PROBE_ROWS = 8
"""Rows in the validation probe batch."""
_POOL = 64  # decisions collected before choosing the probe rows, spread over the game
_MAX_EPISODES = 8


def _random_legal(obs: Any, info: dict | None, num_actions: int, rng: np.random.Generator) -> int:
    """A uniformly random legal action (the mask comes from the observation or the info)."""
    mask = np.ones(num_actions, dtype=bool)
    if isinstance(obs, dict) and "action_mask" in obs:
        mask = np.asarray(obs["action_mask"], dtype=bool)
    elif info and "action_mask" in info:
        mask = np.asarray(info["action_mask"], dtype=bool)
    legal = np.flatnonzero(mask)
    return int(rng.choice(legal)) if len(legal) else 0


def _aec_episode(env: Any, spec: EnvSpec, seats: set[str], rng: np.random.Generator,
                 seed: int, found: list[np.ndarray]) -> None:
    env.reset(seed=seed)
    for name in env.agent_iter(spec.step_limit):
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if name in seats:
            found.append(flat_obs(obs))
        if len(found) >= _POOL:
            return
        env.step(_random_legal(obs, info, spec.num_actions, rng))


def _parallel_episode(env: Any, spec: EnvSpec, seats: set[str], rng: np.random.Generator,
                      seed: int, found: list[np.ndarray]) -> None:
    obs, infos = env.reset(seed=seed)
    for _ in range(spec.step_limit):
        if not env.agents or len(found) >= _POOL:
            return
        found.extend(flat_obs(obs[n]) for n in env.agents if n in seats and n in obs)
        actions = {
            n: _random_legal(obs.get(n), infos.get(n), spec.num_actions, rng) for n in env.agents
        }
        obs, _, _, _, infos = env.step(actions)


def probe_observations(env_id: str, role: str, rows: int = PROBE_ROWS, seed: int = 0) -> np.ndarray:
    """``(rows, *obs_shape)`` float32 observations of ``role``, from random legal play.

    Args:
        env_id: Registered env id.
        role: One of its team roles.
        rows: Batch size.
        seed: Seeds the env resets and the random moves.

    Returns:
        Observations drawn from up to 64 decisions of that role over whole games.
    """
    spec = get_spec(env_id)
    seats = {spec.seats[s] for s in spec.teams[spec.team_of_role(role)]}
    rng = np.random.default_rng(seed)
    play = _parallel_episode if spec.api == "parallel" else _aec_episode
    found: list[np.ndarray] = []
    env = make_env(env_id)
    try:
        for episode in range(_MAX_EPISODES):
            play(env, spec, seats, rng, (seed + episode) % 2**31, found)
            if len(found) >= _POOL:
                break
    finally:
        env.close()
    if not found:
        raise RuntimeError(f"{env_id} gave role {role!r} no decision in {_MAX_EPISODES} games")
    picks = np.sort(rng.choice(len(found), size=rows, replace=len(found) < rows))
    return np.stack([found[i] for i in picks]).astype(np.float32)


def _run_probe(lease: Lease, model: SandboxedModel, obs: np.ndarray, num_actions: int,
               limit_s: float, load_limit_s: float) -> None:
    rows = len(obs)
    try:
        out = lease.run(model, obs, limit_s, num_actions, load_limit_s)
    except TimeoutError:
        raise InvalidSubmission(
            f"the model did not answer a probe batch of {rows} observations within {limit_s}s; "
            "a policy must answer a batch in well under a second"
        ) from None
    except OnnxRunError as exc:
        raise InvalidSubmission(
            f"the model failed on a probe batch of {rows} real observations: {exc}"
        ) from None
    if out.dtype != np.float32 or out.shape != (rows, num_actions):
        raise InvalidSubmission(
            f"on a probe batch of {rows} observations the model returned {out.dtype} "
            f"{list(out.shape)}, expected float32 [{rows}, {num_actions}]"
        )
    if not np.isfinite(out).all():
        raise InvalidSubmission(
            f"the model returned NaN or infinite logits on a probe batch of {rows} real "
            "observations"
        )


def run_probes(lease: Lease, model: SandboxedModel, probe: np.ndarray, num_actions: int,
               limit_s: float, load_limit_s: float) -> None:
    """``onnx.checker``, the session load and both probe runs on one leased worker.

    Args:
        lease: A worker of the validation sandbox.
        model: The model (already through the static checks).
        probe: :func:`probe_observations` of its env and role.
        num_actions: Width of the logits it must return.
        limit_s: Deadline of each probe run.
        load_limit_s: Deadline of the checker and of the load.

    Raises:
        InvalidSubmission: What to fix (a refused, slow, failing or NaN-giving model).
        SandboxCrashed: The worker died under it.
    """
    try:
        lease.check(model.data, load_limit_s)
        lease.load(model, load_limit_s)
    except SandboxTimeout:
        raise InvalidSubmission(
            f"checking and loading the model took more than {load_limit_s}s; simplify it"
        ) from None
    try:
        for batch in (probe, probe[:1]):  # two batch sizes: the batch axis must really be dynamic
            _run_probe(lease, model, batch, num_actions, limit_s, load_limit_s)
    except InvalidSubmission:
        if lease.alive:
            lease.drop(model.key)  # refused: the worker need not keep it
        raise
