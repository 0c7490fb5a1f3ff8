"""Env instances for the generic match loop: in this process, or sharded over processes.

The loop talks to envs only through batched ``reset`` / ``step`` calls on slots, so
the envs may live here (:class:`InlineEnvs`) or in worker processes
(:class:`ProcessEnvs`). PettingZoo envs are plain Python: when env stepping is the
bottleneck (MPE physics), worker processes step shards of the matches in parallel
while this process runs the batched policy forwards.

Env-side work is done by two pure functions, :func:`reset_env` and :func:`step_env`,
used identically in both places.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.adapters import direct
from envs.registry import flat_obs, get_entry, get_spec, make_env, register_env
from envs.spec import EnvSpec

Pending = dict[int, tuple[np.ndarray, np.ndarray]]  # seat -> (observation, legal mask)


@dataclass
class StepOut:
    """What one env step produced: next decisions, reward per seat, whether it ended."""

    pending: Pending
    rewards: list[float]
    finished: bool


def action_mask(obs: Any, info: dict | None, num_actions: int) -> np.ndarray:
    """Legal-move mask from an ``action_mask`` in the observation or info, else all legal."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["action_mask"], dtype=bool)
    if info and "action_mask" in info:
        return np.asarray(info["action_mask"], dtype=bool)
    return np.ones(num_actions, dtype=bool)


def _aec_pending(spec: EnvSpec, env: Any) -> Pending:
    name = env.agent_selection
    obs = env.observe(name)
    mask = action_mask(obs, env.infos.get(name), spec.num_actions)
    return {spec.seats.index(name): (flat_obs(obs), mask)}


def reset_env(spec: EnvSpec, env: Any, seed: int) -> Pending:
    """Reset ``env`` with the match seed and return the first decisions."""
    seed = int(seed % (2**31))
    if spec.api != "parallel":
        env.reset(seed=seed)
        return _aec_pending(spec, env)
    obs, infos = env.reset(seed=seed)
    return {
        spec.seats.index(n): (flat_obs(o), action_mask(o, infos.get(n), spec.num_actions))
        for n, o in obs.items()
    }


def step_env(spec: EnvSpec, env: Any, actions: dict[int, int]) -> StepOut:
    """Apply the decided ``actions`` (seat -> action) and return the next decisions."""
    rewards = [0.0] * spec.num_seats
    if spec.api == "parallel":
        obs, rew, term, trunc, infos = env.step({spec.seats[s]: a for s, a in actions.items()})
        for name, r in rew.items():
            rewards[spec.seats.index(name)] += float(r)
        pending = {
            spec.seats.index(n): (flat_obs(o), action_mask(o, infos.get(n), spec.num_actions))
            for n, o in obs.items()
            if not (term.get(n) or trunc.get(n))
        }
        return StepOut(pending, rewards, not pending or not env.agents)
    ((seat, action),) = actions.items()
    # AEC semantics: an agent's cumulative reward covers the time since it last acted
    # and is reset when it acts, so bank it just before the step.
    rewards[seat] += float(env._cumulative_rewards.get(spec.seats[seat], 0.0))
    env.step(action)
    if all(env.terminations[n] or env.truncations[n] for n in env.agents):
        for name, r in env._cumulative_rewards.items():
            rewards[spec.seats.index(name)] += float(r)
        return StepOut({}, rewards, True)
    return StepOut(_aec_pending(spec, env), rewards, False)


class InlineEnvs:
    """Env instances in this process, kept per env id and reused across calls."""

    def __init__(self) -> None:
        self._envs: dict[str, list[Any]] = {}

    def _slot(self, env_id: str, slot: int) -> Any:
        envs = self._envs.setdefault(env_id, [])
        while len(envs) <= slot:
            envs.append(direct(make_env(env_id)))
        return envs[slot]

    def reset(self, env_id: str, items: list[tuple[int, int]]) -> list[Pending]:
        """``items``: (slot, seed) pairs."""
        spec = get_spec(env_id)
        return [reset_env(spec, self._slot(env_id, slot), seed) for slot, seed in items]

    def step(self, env_id: str, items: list[tuple[int, dict[int, int]]]) -> list[StepOut]:
        """``items``: (slot, seat -> action) pairs."""
        spec = get_spec(env_id)
        return [step_env(spec, self._slot(env_id, slot), acts) for slot, acts in items]

    def close(self) -> None:
        for envs in self._envs.values():
            for env in envs:
                env.close()
        self._envs.clear()


def _worker(conn: Any) -> None:
    """Worker process: serve reset/step requests on its own InlineEnvs until told to stop."""
    envs = InlineEnvs()
    registered: set[str] = set()
    while True:
        msg = conn.recv()
        if msg is None:
            envs.close()
            return
        cmd, entry, items = msg
        try:
            # Envs registered at run time in the parent are unknown to a spawned child.
            if entry.spec.env_id not in registered:
                register_env(entry.spec.env_id, entry.entry_point, entry.spec,
                             vector_core=entry.vector_core)
                registered.add(entry.spec.env_id)
            conn.send(("ok", getattr(envs, cmd)(entry.spec.env_id, items)))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ProcessEnvs:
    """Envs sharded over ``workers`` processes; slot ``s`` lives in worker ``s % workers``.

    Only our own data crosses the pipes (observations, masks, rewards, actions).
    """

    def __init__(self, workers: int) -> None:
        ctx = mp.get_context("spawn")  # no fork after torch/threads have started
        self._conns, self._procs = [], []
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child,), daemon=True)
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)

    def _scatter(self, cmd: str, env_id: str, items: list[tuple[int, Any]]) -> list[Any]:
        n = len(self._conns)
        shards: list[list[int]] = [[] for _ in range(n)]
        for i, (slot, _) in enumerate(items):
            shards[slot % n].append(i)
        entry = get_entry(env_id)
        for w, idx in enumerate(shards):
            if idx:
                self._conns[w].send((cmd, entry, [(items[i][0] // n, items[i][1]) for i in idx]))
        out: list[Any] = [None] * len(items)
        for w, idx in enumerate(shards):
            if idx:
                status, result = self._conns[w].recv()
                if status != "ok":
                    raise RuntimeError(f"env worker {w} failed: {result}")
                for i, r in zip(idx, result):
                    out[i] = r
        return out

    def reset(self, env_id: str, items: list[tuple[int, int]]) -> list[Pending]:
        return self._scatter("reset", env_id, items)

    def step(self, env_id: str, items: list[tuple[int, dict[int, int]]]) -> list[StepOut]:
        return self._scatter("step", env_id, items)

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        self._conns, self._procs = [], []
