"""TrueSkill, alpha-Rank and Nash-averaging rankings of one board, side by side. Pure.

What the payoff page and its API show: for every agent its place by conservative
TrueSkill score (``mu - 3 sigma``, the leaderboard's order), by alpha-Rank mass and by
Nash-averaged skill, plus the board's significant cycles. Where the three orders
agree the board is a ladder; where they part, the cycles say why.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from league.evaluation.alpharank import DEFAULT_ALPHA, alpharank
from league.evaluation.cycles import Cycle, intransitive_cycles
from league.evaluation.headtohead import HeadToHead
from league.evaluation.nash_averaging import nash_average_head_to_head
from league.ratings.rating import Rating

__all__ = ["AgentRanks", "BoardRankings", "board_rankings"]


@dataclass(frozen=True)
class AgentRanks:
    """One agent's places (1 is best) and the numbers behind them.

    Attributes:
        agent: The agent.
        trueskill_rank: Place by ``mu - 3 sigma`` (``None`` without a rating).
        conservative: ``mu - 3 sigma`` (``None`` without a rating).
        alpharank_rank: Place by alpha-Rank mass.
        alpharank_mass: Stationary mass.
        nash_rank: Place by Nash-averaged skill (agents of equal skill share the best place).
        nash_skill: Log-odds payoff against the maximum-entropy Nash mixture (0 = unbeaten).
        nash_mass: The agent's weight in that mixture.
    """

    agent: Hashable
    trueskill_rank: int | None
    conservative: float | None
    alpharank_rank: int
    alpharank_mass: float
    nash_rank: int
    nash_skill: float
    nash_mass: float


@dataclass(frozen=True)
class BoardRankings:
    """The three rankings of a board and its significant 3-cycles.

    Attributes:
        agents: One entry per agent, in the head-to-head's agent order.
        cycles: Significant cycles (see :func:`league.evaluation.cycles.intransitive_cycles`).
        alpha: alpha-Rank's selection intensity.
    """

    agents: list[AgentRanks]
    cycles: list[Cycle]
    alpha: float


def _places(order: np.ndarray) -> np.ndarray:
    places = np.empty(order.size, dtype=np.int64)
    places[order] = np.arange(1, order.size + 1)
    return places


def board_rankings(h2h: HeadToHead, ratings: Mapping[Hashable, Rating], *, alpha: float = DEFAULT_ALPHA,
                   cycle_alpha: float = 0.05, min_games: int = 10) -> BoardRankings:
    """Rank a board three ways and list its cycles.

    Args:
        h2h: Head-to-head counts of the board's agents.
        ratings: TrueSkill rating of each agent (agents without one get no TrueSkill place).
        alpha: alpha-Rank selection intensity.
        cycle_alpha: Family-wise level of a reported cycle.
        min_games: Pairs with fewer games are not tested for cycles.
    """
    n = len(h2h.agents)
    if n == 0:
        return BoardRankings([], [], alpha)
    ar = alpharank(h2h.win_rate(), alpha=alpha)
    nash = nash_average_head_to_head(h2h)
    rated = [a for a in h2h.agents if a in ratings]
    by_score = sorted(rated, key=lambda a: -ratings[a].conservative)
    ts_place = {a: i + 1 for i, a in enumerate(by_score)}
    ar_place = _places(ar.ranking)
    # Skills of the Nash core are exactly 0: equal skills share the best place among them.
    nash_place = 1 + (nash.skill[None, :] > nash.skill[:, None]).sum(axis=1)
    out = [AgentRanks(agent=a, trueskill_rank=ts_place.get(a),
                      conservative=ratings[a].conservative if a in ratings else None,
                      alpharank_rank=int(ar_place[i]), alpharank_mass=float(ar.mass[i]),
                      nash_rank=int(nash_place[i]), nash_skill=float(nash.skill[i]),
                      nash_mass=float(nash.mixture[i]))
           for i, a in enumerate(h2h.agents)]
    return BoardRankings(out, intransitive_cycles(h2h, alpha=cycle_alpha, min_games=min_games), alpha)
