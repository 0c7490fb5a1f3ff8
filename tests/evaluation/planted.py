"""A connect four board with a planted pair: two accounts of one owner, one throwing games to the other.

``thrower`` plays ``heuristic:epsilon=0.1`` against everyone, except against its
partner (``heuristic:epsilon=0.6``), where it plays random moves. Five honest builtins
(no owner) complete the board. Matches are played by the real engine, interleaved in
a seeded order, and recorded through the ladder's recorder (ratings, rating events),
as a ladder would.
"""

from __future__ import annotations

import itertools

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from agents.catalog import make_policy
from arena.agent_status import AgentStatus
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.ladder.recorder import MatchRecorder
from arena.ladder.registration import register_env
from arena.storage.db import repositories as repo
from envs.registry import get_spec

C4 = "connect_four-v3"
HONEST = ("heuristic", "heuristic:epsilon=0.2", "heuristic:epsilon=0.4", "heuristic:epsilon=0.8", "random")
OWNER = "mallory"


def plant_board(sessions: sessionmaker[Session], *, planted: bool = True, games_per_pair: int = 40,
                thrown: int = 80, seed: int = 0) -> dict[str, int]:
    """Play and record the board; returns agent ids by key (``thrower``, ``partner``, the honest ones)."""
    spec = get_spec(C4)
    with sessions.begin() as session:
        rating_env = register_env(session, C4)
        owner = repo.create_user(session, OWNER)
        ids = repo.get_or_create_agents(session, C4, HONEST, "builtin", status=AgentStatus.RATED)
        ids |= repo.get_or_create_agents(session, C4, ["thrower", "partner"], "builtin", owner_id=owner,
                                         status=AgentStatus.RATED)
    honest = {k: make_policy(k, C4) for k in HONEST}
    fair = {**honest, "thrower": make_policy("heuristic:epsilon=0.1", C4),
            "partner": make_policy("heuristic:epsilon=0.6", C4)}
    throwing = {**fair, "thrower": make_policy("random", C4)} if planted else fair
    keys = [*HONEST, "thrower", "partner"]
    jobs = [(job, False) for n, (a, b) in enumerate(itertools.combinations(keys, 2)) if {a, b} != {"thrower", "partner"}
            for job in plan_matches([a, b], spec, games_per_pair, seed=seed * 1000 + n)]
    jobs += [(job, True) for job in plan_matches(["thrower", "partner"], spec, thrown, seed=seed * 1000 + 999)]
    order = np.random.default_rng(seed).permutation(len(jobs))
    engine = MatchEngine()
    try:
        normal = engine.play(C4, [j for j, t in jobs if not t], fair)
        thrown_records = engine.play(C4, [j for j, t in jobs if t], throwing)
    finally:
        engine.close()
    records = iter(normal), iter(thrown_records)
    played = [next(records[t]) for _, t in jobs]
    recorder = MatchRecorder(sessions, spec, rating_env)
    ordered = [played[i] for i in order]
    for start in range(0, len(ordered), 100):
        recorder.record(ordered[start:start + 100], ids)
    return ids
