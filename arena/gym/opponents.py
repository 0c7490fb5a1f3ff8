"""The opponents of a Gym env: named agents, local files, a PFSP pool; and each episode's plan.

An opponent list holds *entries*, each equally likely per episode:

    ``"random"``, ``"heuristic"``, ``"heuristic:epsilon=0.3"``, ``"chaser"``, ...
        Arena's scripted agents (:func:`agents.catalog.make_policy`).
    ``"file:path/agent.safetensors"``, ``"file:path/agent.onnx"``
        A local checkpoint or ONNX model (spec JSON beside it), as ``arena play`` takes them.
    ``"pfsp:path/to/dir"``
        Every ``*.safetensors`` and ``*.onnx`` file in the directory (a local snapshot
        pool, e.g. the checkpoints your own training loop saved), drawn by AlphaStar's
        prioritized fictitious self-play: opponents the learner loses to more often are
        drawn more often (:func:`league.scheduling.matchmaking.pfsp_weights`, ``squared``), from the
        win rates this env has observed (:class:`league.scheduling.matchmaking.WinRateTable`).
    ``"arena:<agent_id>@<url>"``
        A published agent of a running Arena (or one of your own, with your token):
        downloaded once into a local cache through the API and loaded as a ``file:``
        opponent (:mod:`arena.client.published`).
    A :class:`~agents.policy.Policy` object
        Used as it is (its ``agent_id`` names it).

Policies are built on first draw and kept (a pool of many snapshots loads only the
ones drawn).

Every episode is planned from ``(env seed, episode index)`` alone by
:func:`plan_episodes`: its match seed, the learner's team, and the opponent of every
other team. The single and the vector env use the same function, which is why a vector
env and single envs given the same seeds meet the same opponents, who make the same
moves. The opponents' moves draw from :class:`~agents.policy.MatchRng` streams keyed by
(match seed, seat, ply), exactly as in a rated match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agents.policy import Policy, splitmix64
from envs.errors import UnknownAgent

POOL_SUFFIXES = (".safetensors", ".onnx")
# Salts of the per-episode draws (any distinct constants; changing one changes every plan).
_SALT_TEAM = np.uint64(0x7EA3)
_SALT_ENTRY = np.uint64(0xE7F1)
_SALT_MEMBER = np.uint64(0x3E3B)
_SEED_MASK = (1 << 62) - 1


def fresh_seed() -> int:
    """An env seed from the OS's entropy (for envs created and reset without a seed)."""
    return int(np.random.SeedSequence().entropy) & _SEED_MASK


def match_seeds(env_seeds: np.ndarray, episodes: np.ndarray) -> np.ndarray:
    """The match seed of each ``(env seed, episode)``: :func:`agents.policy.derive_seed`, vectorized
    over both arguments (``derive_seed(s, k)`` equals ``match_seeds([s], [k])[0]``)."""
    base = splitmix64(np.asarray(env_seeds, dtype=np.int64).astype(np.uint64))
    with np.errstate(over="ignore"):
        mixed = splitmix64(base ^ splitmix64(np.asarray(episodes, dtype=np.uint64)))
    return (mixed >> np.uint64(1)).astype(np.int64)


def _unit(seeds: np.ndarray, salt: np.uint64) -> np.ndarray:
    """A uniform float in [0, 1) per seed, independent for each ``salt``."""
    with np.errstate(over="ignore"):
        bits = splitmix64(seeds.astype(np.uint64) ^ splitmix64(salt))
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


@dataclass
class EpisodePlans:
    """What each planned episode is (arrays over episodes).

    Attributes:
        seeds: ``(k,)`` match seeds (the PettingZoo reset seed and the opponents' streams).
        learner_team: ``(k,)`` the team the learner plays.
        opponents: ``(k, teams)`` index into :attr:`Opponents.members` of the opponent
            driving each team (``-1`` in the learner's column).
    """

    seeds: np.ndarray
    learner_team: np.ndarray
    opponents: np.ndarray


@dataclass
class _Entry:
    """One entry of the opponent list: a single agent, or a PFSP pool of several."""

    name: str
    members: list[int]
    pool: bool = False


@dataclass
class Opponents:
    """The opponent list of one env, its policies (built on first use) and PFSP statistics.

    Args:
        env_id: The env the opponents play.
        names: Opponent names (module docstring) or :class:`Policy` objects.
    """

    env_id: str
    names: Sequence[str | Policy]
    members: list[str] = field(default_factory=list, init=False)
    entries: list[_Entry] = field(default_factory=list, init=False)
    _policies: dict[int, Policy] = field(default_factory=dict, init=False)
    _table: object = field(default=None, init=False)

    def __post_init__(self) -> None:
        if isinstance(self.names, str):
            self.names = [self.names]
        if not self.names:
            raise UnknownAgent("opponents is empty: name at least one, e.g. opponents=['random']")
        for item in self.names:
            if not isinstance(item, str):
                if not isinstance(item, Policy):
                    raise UnknownAgent(f"opponent {item!r} is neither a name nor a Policy")
                self._policies[len(self.members)] = item
                self._add(item.agent_id, [item.agent_id])
            elif item.startswith("pfsp:"):
                self._add(item, _pool_files(item[len("pfsp:"):]), pool=True)
            else:
                self._add(item, [item])
                self.policy(len(self.members) - 1)  # fail now on a bad name, not mid-training
        if any(e.pool for e in self.entries):
            from league.scheduling.matchmaking import WinRateTable

            self._table = WinRateTable()

    def _add(self, name: str, members: list[str], pool: bool = False) -> None:
        start = len(self.members)
        self.members.extend(members)
        self.entries.append(_Entry(name, list(range(start, len(self.members))), pool))

    def policy(self, member: int) -> Policy:
        """The policy of member ``member`` (built on first use)."""
        if member not in self._policies:
            from agents.catalog import make_policy

            name = self.members[member]
            if self._in_pool(member):
                name = f"file:{name}"
            elif name.startswith("arena:"):
                from arena.client.published import pull_published

                name = f"file:{pull_published(name)}"
            self._policies[member] = make_policy(name, self.env_id)
        return self._policies[member]

    def _in_pool(self, member: int) -> bool:
        return any(e.pool and member in e.members for e in self.entries)

    def draw(self, u_entry: np.ndarray, u_member: np.ndarray) -> np.ndarray:
        """Member index per row: an entry uniformly from ``u_entry``, then (pools) PFSP from ``u_member``."""
        entry = np.minimum((u_entry * len(self.entries)).astype(np.int64), len(self.entries) - 1)
        out = np.empty(len(entry), dtype=np.int64)
        for e, item in enumerate(self.entries):
            rows = np.flatnonzero(entry == e)
            if not rows.size:
                continue
            if not item.pool:
                out[rows] = item.members[0]
                continue
            cdf = np.cumsum(self._pfsp_probabilities(item))
            pick = np.searchsorted(cdf, u_member[rows] * cdf[-1], side="right")
            out[rows] = np.asarray(item.members)[np.minimum(pick, len(item.members) - 1)]
        return out

    def _pfsp_probabilities(self, entry: _Entry) -> np.ndarray:
        from league.scheduling.matchmaking import pfsp_weights

        return pfsp_weights(self._table.win_rates(entry.members))

    def record(self, members: np.ndarray, outcomes: np.ndarray) -> None:
        """Book the learner's results (``outcomes``: +1/0/-1) against pool members, for PFSP."""
        if self._table is None:
            return
        for member, outcome in zip(np.asarray(members).tolist(), np.asarray(outcomes).tolist()):
            if self._in_pool(member):
                self._table.record(member, (outcome + 1.0) / 2.0)

    def win_rates(self) -> dict[str, float]:
        """The learner's smoothed win rate against every pool member (PFSP's input)."""
        if self._table is None:
            return {}
        return {self.members[m]: self._table.win_rate(m) for e in self.entries if e.pool for m in e.members}


def plan_episodes(opponents: Opponents, learner_teams: Sequence[int], num_teams: int,
                  env_seeds: np.ndarray, episodes: np.ndarray) -> EpisodePlans:
    """Plan episodes ``episodes`` of the envs seeded ``env_seeds`` (module docstring).

    Args:
        opponents: The env's opponents.
        learner_teams: Teams the learner may play, one drawn uniformly per episode.
        num_teams: Teams in the game.
        env_seeds: ``(k,)`` the env seed of each episode.
        episodes: ``(k,)`` the index of each episode in its env (0 after a seeded reset).
    """
    seeds = match_seeds(env_seeds, episodes)
    choice = np.minimum((_unit(seeds, _SALT_TEAM) * len(learner_teams)).astype(np.int64), len(learner_teams) - 1)
    learner = np.asarray(learner_teams, dtype=np.int64)[choice]
    drawn = np.full((len(seeds), num_teams), -1, dtype=np.int64)
    for team in range(num_teams):
        salt = np.uint64(team) << np.uint64(32)
        member = opponents.draw(_unit(seeds, _SALT_ENTRY ^ salt), _unit(seeds, _SALT_MEMBER ^ salt))
        drawn[:, team] = np.where(learner == team, -1, member)
    return EpisodePlans(seeds, learner, drawn)


def _pool_files(directory: str) -> list[str]:
    path = Path(directory)
    if not path.is_dir():
        raise UnknownAgent(f"pfsp:{directory}: no such directory (name a folder of .safetensors/.onnx snapshots)")
    files = sorted(str(p) for p in path.iterdir() if p.suffix in POOL_SUFFIXES)
    if not files:
        raise UnknownAgent(f"pfsp:{directory}: the folder has no .safetensors or .onnx snapshots")
    return files

