"""Opponent draws of a league trained outside Arena (the league API), pure.

A trainer running anywhere asks the league API for opponents; they are drawn as in
Arena's own leagues (:func:`league.scheduling.roles.opponent_distribution`, PFSP over the
learner's :class:`~league.scheduling.matchmaking.WinRateTable`), among:

* ``self``: the learner's current weights (self-play; those results move no win rate);
* the league's snapshots still playing (past players);
* the board: the env's scripted agents (the baselines, with the ``baseline_share`` of a
  main agent's games) and the downloadable neural agents the caller picked, which join
  the past players.

Opponent ids are ``"self"`` and agent ids as strings. The league's state (learners,
snapshots, reports) and where the candidates come from stay with the service
(:mod:`arena.training.outside_league`, the league API's routes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from league.scheduling.matchmaking import WinRateTable
from league.scheduling.roles import SELF, Role, RoleConfig, opponent_distribution


@dataclass(frozen=True)
class Candidate:
    """An opponent the league may draw.

    Attributes:
        id: ``"self"`` or the agent id as a string (the win-rate tables' key).
        kind: ``self``, ``builtin`` (a scripted agent), ``snapshot`` (the league's) or
            ``agent`` (a neural agent of the board).
        agent_id: The agent's id (``None`` for ``self``).
        key: The agent's key (for a scripted agent, its name in ``arena.gym``).
        name: Its display name.
    """

    id: str
    kind: str
    agent_id: int | None = None
    key: str | None = None
    name: str = ""


SELF_CANDIDATE = Candidate(SELF, "self", name="self")


class PastPlayer(NamedTuple):
    """A snapshot of the league that is still playing, and whose it is."""

    candidate: Candidate
    learner: str
    role: str


class Draw(NamedTuple):
    """One opponent of a learner's distribution."""

    candidate: Candidate
    probability: float
    win_rate: float
    games: float
    """The learner's decayed games against it."""


def opponent_draws(learner: str, role: Role, table: WinRateTable, snapshots: Sequence[PastPlayer],
                   baselines: Sequence[Candidate], board: Sequence[Candidate], config: RoleConfig) -> list[Draw]:
    """Every opponent ``learner`` may draw, with its probability.

    Args:
        learner: The learner's name (its own snapshots are not main agents to exploit).
        role: The learner's role.
        table: The learner's decayed win rates.
        snapshots: The league's snapshots still playing, in the order they were pushed.
        baselines: The env's scripted agents on the board.
        board: The downloadable neural agents of the board (any of the league's own
            snapshots among them are left out: they are past players already).
        config: The league's role constants.

    Raises:
        ValueError: The role has no opponent yet (a main exploiter with no main snapshot).
    """
    own = {s.candidate.agent_id for s in snapshots}
    others = [c for c in board if c.agent_id not in own]
    candidates = {SELF: SELF_CANDIDATE, **{s.candidate.id: s.candidate for s in snapshots},
                  **{c.id: c for c in (*baselines, *others)}}
    latest_main = {s.learner: s.candidate.id for s in snapshots if s.role == "main" and s.learner != learner}
    ids, probs = opponent_distribution(
        role, past=[*(s.candidate.id for s in snapshots), *(c.id for c in others)],
        baselines=[c.id for c in baselines], past_main=[s.candidate.id for s in snapshots if s.role == "main"],
        main_agents=list(latest_main.values()) if role == "main_exploiter" else [],
        win_rates={i: table.win_rate(i) for i in candidates}, config=config)
    return [Draw(candidates[i], float(p), table.win_rate(i) if i != SELF else 0.5, table.games(i))
            for i, p in zip(ids, probs)]


def sample_draws(probabilities: Sequence[float], n: int, rng: np.random.Generator) -> list[int]:
    """``n`` indexes drawn (with replacement) from ``probabilities``."""
    p = np.asarray(probabilities, dtype=np.float64)
    return rng.choice(len(p), size=n, p=p / p.sum()).tolist()
