"""Turn "these agents, N matches, master seed S" into concrete match jobs.

Seeds derive from the master seed and the match index only, so a run's matches are
the same whatever the batch size or worker count. Seats are balanced: in symmetric
games every ordered pairing is played equally often, so each agent gets both seats.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

from agents.policy import derive_seed
from arena.engine.records import MatchJob
from envs.spec import EnvSpec


def pairings(agents: list[str], spec: EnvSpec) -> list[tuple[str, ...]]:
    """The line-ups that are cycled through.

    Symmetric games: every ordered selection of ``num_teams`` distinct agents (so two
    agents give A-B and B-A); a single agent plays itself. Asymmetric games (roles):
    exactly one agent per role, in role order.
    """
    teams = spec.num_teams
    if not spec.symmetric:
        if len(agents) != teams:
            roles = ", ".join(spec.roles)
            raise ValueError(f"{spec.env_id} needs exactly {teams} agents, one per role ({roles})")
        return [tuple(agents)]
    if len(agents) == 1:
        return [tuple(agents) * teams]
    if len(agents) < teams:
        raise ValueError(f"{spec.env_id} needs at least {teams} agents, got {len(agents)}")
    return list(permutations(agents, teams))


def plan_matches(agents: list[str], spec: EnvSpec, matches: int, seed: int, start: int = 0) -> list[MatchJob]:
    """Jobs ``start .. start + matches - 1`` of a run with master ``seed``."""
    lineups = pairings(agents, spec)
    seeds = derive_seed(seed, np.arange(start, start + matches)).tolist()
    return [
        MatchJob(seed=s, agents=lineups[i % len(lineups)])
        for i, s in enumerate(seeds, start)
    ]
