"""Seat advantage: how much moving first is worth, per env and per agent. Pure.

Most board games favour the first mover (connect four is a first-player win with
perfect play). The ladder plays every pairing in both seats, so ratings are fair; this
module says how big the edge is.

* Env: the first mover's score ``s`` (wins plus half the draws, per game) over all
  games, with a 95% Wilson interval (valid with draws: see
  :mod:`league.evaluation.significance`). The **first-move value** is the score difference
  between the seats, ``s - (1 - s) = 2 s - 1``, and the same edge on rating scales:
  Elo points ``400 log10(s / (1 - s))`` and TrueSkill mu
  ``sqrt(2) beta Phi^-1(s)`` (the mu gap at which the better player scores ``s``,
  ignoring the draw margin). Since the ladder balances seats over each pairing, the
  pooled score is not confounded by who sat where.
* Agent: W/D/L as first and as second mover, each seat's score, and the difference
  with a 95% normal interval (the two seats' games are independent samples; each
  variance is bounded by ``s (1 - s) / n``); plus the seat imbalance
  ``games first - games second``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from scipy.special import ndtri

from league.evaluation.headtohead import Game
from league.evaluation.significance import wilson_interval
from league.ratings.rating import SIGMA, Z95

__all__ = ["AgentSeats", "EnvSeatAdvantage", "SeatRecord", "agent_seat_record", "agent_seats", "env_seat_advantage",
           "seat_advantage"]

DEFAULT_BETA = SIGMA / 2  # RatingEnv's default performance noise


@dataclass(frozen=True)
class SeatRecord:
    """Results of games played in one seat."""

    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float | None:
        """Points per game (a draw is half), ``None`` without games."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else None

    def add(self, score: float) -> SeatRecord:
        """This record plus one game scoring ``score``."""
        return SeatRecord(self.wins + (score == 1.0), self.draws + (score == 0.5), self.losses + (score == 0.0))


@dataclass(frozen=True)
class EnvSeatAdvantage:
    """The first mover's edge in an env.

    Attributes:
        first: Results of the first mover (the second mover's are their mirror).
        score: First mover's points per game, ``None`` without games.
        ci_low: Lower end of the 95% interval of ``score``.
        ci_high: Upper end.
        value: ``2 score - 1``: how many more points per game the first seat takes.
        value_ci: The 95% interval of ``value``.
        elo: The edge in Elo points (``None`` at a score of 0 or 1, or without games).
        trueskill_mu: The edge in TrueSkill mu for the given beta (``None`` likewise).
    """

    first: SeatRecord
    score: float | None
    ci_low: float
    ci_high: float
    value: float | None
    value_ci: tuple[float, float]
    elo: float | None
    trueskill_mu: float | None


@dataclass(frozen=True)
class AgentSeats:
    """One agent's results by seat.

    Attributes:
        agent: The agent.
        first: Its results when it moved first.
        second: Its results when it moved second.
        difference: ``first.score - second.score`` (``None`` unless both seats were played).
        difference_ci: 95% interval of ``difference`` (``None`` likewise).
        imbalance: ``first.games - second.games``.
    """

    agent: Hashable
    first: SeatRecord
    second: SeatRecord
    difference: float | None
    difference_ci: tuple[float, float] | None
    imbalance: int


def env_seat_advantage(games: Iterable[Game], beta: float = DEFAULT_BETA) -> EnvSeatAdvantage:
    """How much the first move is worth over ``games`` (all of one env).

    Args:
        games: Finished games of the env.
        beta: TrueSkill performance noise of the env's ladder, for ``trueskill_mu``.
    """
    first = SeatRecord()
    for g in games:
        first = first.add(g.score)
    return seat_advantage(first, beta)


def seat_advantage(first: SeatRecord, beta: float = DEFAULT_BETA) -> EnvSeatAdvantage:
    """How much the first move is worth, from the first mover's pooled record (e.g. counted in SQL)."""
    low, high = wilson_interval(first.wins + 0.5 * first.draws, first.games)
    s = first.score
    extreme = s is None or s in (0.0, 1.0)
    return EnvSeatAdvantage(
        first=first, score=s, ci_low=low, ci_high=high,
        value=None if s is None else 2 * s - 1, value_ci=(2 * low - 1, 2 * high - 1),
        elo=None if extreme else 400 * math.log10(s / (1 - s)),
        trueskill_mu=None if extreme else math.sqrt(2) * beta * float(ndtri(s)),
    )


def agent_seats(games: Iterable[Game]) -> dict[Hashable, AgentSeats]:
    """Every agent's results by seat over ``games``.

    Returns:
        ``{agent: AgentSeats}`` in order of first appearance.
    """
    by_seat: dict[Hashable, list[SeatRecord]] = {}
    for g in games:
        by_seat.setdefault(g.first, [SeatRecord(), SeatRecord()])
        by_seat.setdefault(g.second, [SeatRecord(), SeatRecord()])
        by_seat[g.first][0] = by_seat[g.first][0].add(g.score)
        by_seat[g.second][1] = by_seat[g.second][1].add(1.0 - g.score)
    return {agent: agent_seat_record(agent, first, second) for agent, (first, second) in by_seat.items()}


def agent_seat_record(agent: Hashable, first: SeatRecord, second: SeatRecord) -> AgentSeats:
    """One agent's seat comparison from its records as first and as second mover."""
    difference = ci = None
    if first.games and second.games:
        s1, s2 = first.score, second.score
        difference = s1 - s2
        # Bounded variances (see the module docstring), floored at one game's worth of
        # uncertainty so an all-wins record does not get a zero-width interval.
        var = max(s1 * (1 - s1), 0.25 / first.games) / first.games
        var += max(s2 * (1 - s2), 0.25 / second.games) / second.games
        half = Z95 * math.sqrt(var)
        ci = (max(-1.0, difference - half), min(1.0, difference + half))
    return AgentSeats(agent, first, second, difference, ci, first.games - second.games)
