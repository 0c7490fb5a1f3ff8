"""The positions every agent of an env and role is fingerprinted on.

Played, not sampled: scripted agents (the env's random mover, its heuristic at two
exploration rates, its role baselines with and without exploration) play whole games
through the engine's own env driver (:func:`arena.engine.envpool.reset_env` /
``step_env``), each seat drawing its agent from that mix at the start of every game.
Every decision of a seat of the role with two or more legal actions is a candidate (a
forced move says nothing about a policy); at most :data:`PER_GAME` are kept per game
(so long games do not fill the set with neighbouring positions), duplicates (the same
observation and mask) are dropped, and ``count`` are drawn from twice as many
candidates (or from all there are, once :data:`STALE_GAMES` games in a row found
nothing new: rock-paper-scissors has four). All of it comes from one seed: the same
env, role, count and seed give the same positions in any process, which is what lets
a fingerprint be cached by snapshot hash and compared with one computed elsewhere.

The set is built once per process (``lru_cache``); its :attr:`Positions.digest` names it
in the fingerprint cache, so a change of the env or of this recipe invalidates every
cached fingerprint by itself.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import numpy as np

from agents.baselines import HEURISTICS
from agents.catalog import make_policy
from agents.policy import MatchRng, Policy
from agents.role_baselines import ROLE_BASELINES, baseline_role
from arena.engine.envpool import Pending, reset_env, step_env
from envs.adapters import direct
from envs.registry import get_spec, make_env
from envs.spec import EnvSpec

POSITIONS = 512
"""Positions per env and role."""
POSITIONS_SEED = 2020
"""The seed of every env's positions (games, agents drawn, positions kept)."""
PER_GAME = 32
"""Most positions kept from one game."""
MAX_GAMES = 400
"""Games played at most per set."""
STALE_GAMES = 40
"""Games in a row that found no new position before an env counts as exhausted."""
RECIPE = "v1"
"""Version of this recipe, part of the digest: bump it when the positions change."""


@dataclass(frozen=True)
class Positions:
    """A fingerprint's positions.

    Attributes:
        env_id: The env.
        role: The role whose decisions these are.
        obs: ``(n, *obs_shape)`` float32 observations.
        masks: ``(n, num_actions)`` legal-action masks.
        digest: 16 hex digits naming this set (env, role, recipe, the arrays).
        games: Games played to collect them.
    """

    env_id: str
    role: str
    obs: np.ndarray = field(repr=False)
    masks: np.ndarray = field(repr=False)
    digest: str
    games: int

    def __len__(self) -> int:
        return len(self.obs)


def scripted_mix(env_id: str, role: str) -> tuple[str, ...]:
    """The scripted agents that may take a seat of ``role`` in ``env_id``."""
    names = ["random"]
    if env_id in HEURISTICS:
        names += ["heuristic", "heuristic:epsilon=0.3"]
    for name in ROLE_BASELINES.get(env_id, {}):
        if baseline_role(env_id, name) in (None, role):
            names += [name, f"{name}:epsilon=0.3"]
    return tuple(names)


def _seat_roles(spec: EnvSpec) -> list[str]:
    roles = [""] * spec.num_seats
    for team, seats in enumerate(spec.teams):
        for s in seats:
            roles[s] = spec.roles[team]
    return roles


def _play_game(env, spec: EnvSpec, agents: list[Policy], seed: int, seats: set[int]) -> list[tuple]:
    """One game; returns ``(obs, mask)`` of every decision of ``seats`` with two or more legal moves."""
    found: list[tuple] = []
    pending: Pending = reset_env(spec, env, seed)
    for ply in range(spec.step_limit * spec.num_seats + 1):
        if not pending:
            break
        found += [(obs.astype(np.float32), mask) for seat, (obs, mask) in pending.items()
                  if seat in seats and mask.sum() > 1]
        actions: dict[int, int] = {}
        for policy in {id(agents[s]): agents[s] for s in pending}.values():  # one call per agent
            rows = [s for s in pending if agents[s] is policy]
            rng = MatchRng(np.full(len(rows), seed), np.array(rows), np.full(len(rows), ply))
            chosen = policy.act(np.stack([pending[s][0] for s in rows]), np.stack([pending[s][1] for s in rows]), rng)
            actions.update(zip(rows, (int(a) for a in chosen), strict=True))
        out = step_env(spec, env, actions)
        if out.finished:
            break
        pending = out.pending
    return found


@functools.lru_cache(maxsize=32)
def fingerprint_positions(env_id: str, role: str, count: int = POSITIONS, seed: int = POSITIONS_SEED) -> Positions:
    """The seeded positions of ``role`` in ``env_id`` (see the module docstring).

    Returns:
        At most ``count`` distinct positions (fewer where the env has fewer).

    Raises:
        ValueError: ``role`` is not a role of the env.
    """
    spec = get_spec(env_id)
    if role not in spec.roles:
        raise ValueError(f"{env_id} has no role {role!r}; its roles are {sorted(set(spec.roles))}")
    roles = _seat_roles(spec)
    seats = {s for s, r in enumerate(roles) if r == role}
    mixes = {r: [make_policy(name, env_id) for name in scripted_mix(env_id, r)] for r in set(roles)}
    rng = np.random.default_rng(seed)
    seen: dict[bytes, tuple] = {}
    env = direct(make_env(env_id))
    games = stale = 0
    try:
        while len(seen) < 2 * count and games < MAX_GAMES and stale < STALE_GAMES:
            agents = [mixes[r][rng.integers(len(mixes[r]))] for r in roles]
            found = _play_game(env, spec, agents, int(rng.integers(2**31)), seats)
            games, before = games + 1, len(seen)
            for i in sorted(rng.permutation(len(found))[:PER_GAME]):
                obs, mask = found[i]
                seen.setdefault(obs.tobytes() + mask.tobytes(), (obs, mask))
            stale = stale + 1 if len(seen) == before else 0
    finally:
        env.close()
    candidates = list(seen.values())
    picks = np.sort(rng.permutation(len(candidates))[:count])
    if not len(picks):
        raise RuntimeError(f"{env_id} gave role {role!r} no decision with two legal moves in {games} games")
    obs = np.stack([candidates[i][0] for i in picks])
    masks = np.stack([candidates[i][1] for i in picks])
    digest = hashlib.sha256(f"{RECIPE}|{env_id}|{role}|{obs.shape}|".encode() + obs.tobytes() + masks.tobytes())
    return Positions(env_id, role, obs, masks, digest.hexdigest()[:16], games)
