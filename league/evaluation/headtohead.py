"""Head-to-head records of two-player games, the input of the evaluation measures. Pure.

The service hands these modules plain values straight from its match log:

* :class:`Game` - one finished game: who moved first, who second, the first mover's
  score (1 win, 0.5 draw, 0 loss). One row per match, so nothing is counted twice.
* :class:`HeadToHead` - the same games folded into ``wins/draws/losses`` matrices over
  an ordered list of agents (``wins[i, j]``: games ``i`` won against ``j``, in either
  seat), which is also what the payoff endpoint already reads from the database.

Agents are any hashable ids (database ids, keys, names).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from league.evaluation.payoff import win_rates

__all__ = ["Game", "HeadToHead"]

_SCORES = (0.0, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Game:
    """One finished game between two agents.

    Attributes:
        first: The agent in seat 0 (it moved first).
        second: The agent in seat 1.
        score: ``first``'s score: 1 win, 0.5 draw, 0 loss (``second`` scored ``1 - score``).
    """

    first: Hashable
    second: Hashable
    score: float

    def __post_init__(self) -> None:
        if self.score not in _SCORES:
            raise ValueError(f"a game's score is 1 (win), 0.5 (draw) or 0 (loss), got {self.score!r}")
        if self.first == self.second:
            raise ValueError(f"{self.first!r} cannot play itself")

    @classmethod
    def from_seat(cls, agent: Hashable, opponent: Hashable, seat: int, score: float) -> Game:
        """The game where ``agent`` sat in ``seat`` (0 or 1) and scored ``score``."""
        if seat not in (0, 1):
            raise ValueError(f"seat must be 0 or 1 in a two-player game, got {seat!r}")
        return cls(agent, opponent, score) if seat == 0 else cls(opponent, agent, 1.0 - score)


@dataclass(frozen=True)
class HeadToHead:
    """Win, draw and loss counts of every ordered pair of ``agents``.

    Attributes:
        agents: The agents, in matrix order.
        wins: ``(n, n)``: ``wins[i, j]`` games ``agents[i]`` won against ``agents[j]``.
        draws: ``(n, n)``, symmetric.
        losses: ``(n, n)``; ``losses == wins.T`` when built from games.
    """

    agents: tuple[Hashable, ...]
    wins: np.ndarray
    draws: np.ndarray
    losses: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.agents)
        for name in ("wins", "draws", "losses"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (n, n):
                raise ValueError(f"{name} must be {n}x{n} for {n} agents, got shape {value.shape}")
            if (value < 0).any():
                raise ValueError(f"{name} must be non-negative counts")
            object.__setattr__(self, name, value)
        if len(set(self.agents)) != n:
            raise ValueError("agents must be distinct")
        object.__setattr__(self, "agents", tuple(self.agents))

    @classmethod
    def from_games(cls, games: Iterable[Game], agents: Sequence[Hashable] | None = None) -> HeadToHead:
        """Fold ``games`` into counts; ``agents`` fixes the order (default: first seen).

        Games involving an agent not in a given ``agents`` list are left out.
        """
        games = list(games)
        if agents is None:
            agents = list(dict.fromkeys(a for g in games for a in (g.first, g.second)))
        index = {a: i for i, a in enumerate(agents)}
        n = len(index)
        counts = np.zeros((3, n, n))  # wins, draws, losses of the row agent
        for g in games:
            i, j = index.get(g.first), index.get(g.second)
            if i is None or j is None:
                continue
            outcome = {1.0: 0, 0.5: 1, 0.0: 2}[g.score]
            counts[outcome, i, j] += 1
            counts[2 - outcome, j, i] += 1
        return cls(tuple(agents), counts[0], counts[1], counts[2])

    @property
    def games(self) -> np.ndarray:
        """``(n, n)`` games played by each pair."""
        return self.wins + self.draws + self.losses

    def scores(self) -> np.ndarray:
        """``(n, n)`` points ``i`` took off ``j``: wins plus half the draws."""
        return self.wins + 0.5 * self.draws

    def win_rate(self) -> np.ndarray:
        """``(n, n)`` score per game of ``i`` against ``j``; ``nan`` where they never met."""
        return win_rates(self.wins, self.draws, self.losses)

    def smoothed_win_rate(self, prior_games: float = 1.0) -> np.ndarray:
        """Win rates shrunk towards even by ``prior_games`` virtual games of half a point.

        Never exactly 0 or 1 (so logits stay finite); a pair that never met reads 0.5.
        With ``prior_games=1`` this is the posterior mean under a Beta(1/2, 1/2)
        (Jeffreys) prior on the score.
        """
        return (self.scores() + 0.5 * prior_games) / (self.games + prior_games)

    def logits(self, prior_games: float = 1.0) -> np.ndarray:
        """Antisymmetric log-odds ``log(p / (1 - p))`` of :meth:`smoothed_win_rate`, 0 on the diagonal."""
        p = self.smoothed_win_rate(prior_games)
        out = np.log(p) - np.log1p(-p)
        np.fill_diagonal(out, 0.0)
        return out
