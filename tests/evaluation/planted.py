"""Boards with planted behaviour, played by the real engine and recorded by the ladder's recorder.

* :func:`plant_board`: connect four with a planted pair - two accounts of one owner,
  ``thrower`` playing ``heuristic:epsilon=0.1`` against everyone except its partner
  (``heuristic:epsilon=0.6``), against whom it plays random moves - and five honest
  builtins (no owner).
* :func:`plant_cycle`: three agents that each play well except against one of the others,
  where they play random moves: ``rock`` beats ``scissors`` beats ``paper`` beats ``rock``.

Matches are interleaved in a seeded order and recorded in batches (ratings, rating
events), as a ladder would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from agents.catalog import make_policy
from arena.core.agent_status import AgentStatus
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.ladder.recorder import MatchRecorder
from arena.ladder.registration import register_env
from arena.storage.db import repositories as repo
from envs.registry import get_spec

C4 = "connect_four-v3"
TTT = "tictactoe-v3"
HONEST = ("heuristic", "heuristic:epsilon=0.2", "heuristic:epsilon=0.4", "heuristic:epsilon=0.8", "random")
OWNER = "mallory"
CYCLE = ("rock", "paper", "scissors")
LOSES_TO = {"rock": "paper", "paper": "scissors", "scissors": "rock"}  # plays random moves against

# Which builtin an agent plays against an opponent.
Behaviour = Callable[[str, str], str]


def record_board(sessions: sessionmaker[Session], env_id: str, keys: Sequence[str], behaviour: Behaviour,
                 games: Callable[[str, str], int], owned: Sequence[str] = (), seed: int = 0) -> dict[str, int]:
    """Play every pair of ``keys`` ``games(a, b)`` times, each agent as ``behaviour(it, opponent)``."""
    spec = get_spec(env_id)
    with sessions.begin() as session:
        rating_env = register_env(session, env_id)
        owner = repo.get_user_by_name(session, OWNER)
        owner_id = owner.id if owner else repo.create_user(session, OWNER)
        ids = repo.get_or_create_agents(session, env_id, [k for k in keys if k not in owned], "builtin",
                                        status=AgentStatus.RATED)
        if owned:
            ids |= repo.get_or_create_agents(session, env_id, list(owned), "builtin", owner_id=owner_id,
                                             status=AgentStatus.RATED)
    engine = MatchEngine()
    played = []
    try:
        for n, (a, b) in enumerate(itertools.combinations(keys, 2)):
            policies = {a: make_policy(behaviour(a, b), env_id), b: make_policy(behaviour(b, a), env_id)}
            played += engine.play(env_id, plan_matches([a, b], spec, games(a, b), seed=seed * 1000 + n), policies)
    finally:
        engine.close()
    order = np.random.default_rng(seed).permutation(len(played))
    recorder = MatchRecorder(sessions, spec, rating_env)
    ordered = [played[i] for i in order]
    for start in range(0, len(ordered), 100):
        recorder.record(ordered[start:start + 100], ids)
    return ids


def plant_board(sessions: sessionmaker[Session], *, planted: bool = True, games_per_pair: int = 40,
                thrown: int = 80, seed: int = 0) -> dict[str, int]:
    """The connect four board with the planted pair; agent ids by key."""
    fair = {"thrower": "heuristic:epsilon=0.1", "partner": "heuristic:epsilon=0.6"}

    def behaviour(me: str, opponent: str) -> str:
        if planted and (me, opponent) == ("thrower", "partner"):
            return "random"
        return fair.get(me, me)

    pair = {"thrower", "partner"}
    return record_board(sessions, C4, [*HONEST, "thrower", "partner"], behaviour,
                        lambda a, b: thrown if {a, b} == pair else games_per_pair, owned=("thrower", "partner"),
                        seed=seed)


def plant_cycle(sessions: sessionmaker[Session], *, games_per_pair: int = 30, seed: int = 1) -> dict[str, int]:
    """The tic-tac-toe rock-paper-scissors board; agent ids by key."""
    return record_board(sessions, TTT, CYCLE,
                        lambda me, opponent: "random" if LOSES_TO[me] == opponent else "heuristic",
                        lambda a, b: games_per_pair, seed=seed)
