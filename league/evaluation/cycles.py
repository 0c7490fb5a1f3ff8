"""Intransitive cycles: A beats B beats C beats A, each link significant. Pure.

A board is a ladder when "beats" is transitive. Where it is not, a rating cannot
order the agents, and the honest answer is the cycle itself. This module lists the
3-cycles a board's head-to-head counts support, each with a confidence level.

Method:

* Edge ``i > j``: one-sided exact sign test on their decisive games (draws carry no
  direction), ``p = P(X >= wins)`` with ``X ~ Bin(wins + losses, 1/2)``. Pairs with
  fewer than ``min_games`` games are not tested.
* Cycle ``a > b > c > a``: an intersection-union test - the cycle holds only if all
  three edges do - whose p-value is the largest of its three edge p-values. A triple
  of agents can cycle either way round, so the triple's p-value is twice that (a
  Bonferroni bound over the two orientations; only the observed one can be small).
* Family: every triple whose three pairs were all tested. Adjusted by Holm
  (family-wise error, valid under the dependence of triples sharing an edge) or, on
  request, Benjamini-Hochberg (false discovery rate). A cycle is reported when its
  adjusted p-value is at most ``alpha``; its confidence is ``1 - adjusted p``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from league.evaluation.headtohead import HeadToHead
from league.evaluation.significance import benjamini_hochberg, holm, sign_test

__all__ = ["Cycle", "Edge", "intransitive_cycles"]


@dataclass(frozen=True)
class Edge:
    """One link of a cycle: ``winner`` beats ``loser``.

    Attributes:
        winner: The agent that wins more of their decisive games.
        loser: The other agent.
        wins: ``winner``'s wins against ``loser``.
        draws: Their draws.
        losses: ``winner``'s losses against ``loser``.
        p_value: One-sided sign-test p-value of ``winner > loser``.
    """

    winner: Hashable
    loser: Hashable
    wins: int
    draws: int
    losses: int
    p_value: float


@dataclass(frozen=True)
class Cycle:
    """A significant 3-cycle ``agents[0] > agents[1] > agents[2] > agents[0]``.

    Attributes:
        agents: The three agents in cycle order, the first in board order leading.
        edges: The three links, in cycle order.
        p_value: The triple's p-value (twice its weakest link's), before adjustment.
        adjusted_p: After the multiple-comparison adjustment over the family.
        confidence: ``1 - adjusted_p``.
    """

    agents: tuple[Hashable, Hashable, Hashable]
    edges: tuple[Edge, Edge, Edge]
    p_value: float
    adjusted_p: float
    confidence: float


def _edge_p_values(h2h: HeadToHead, min_games: int) -> tuple[np.ndarray, np.ndarray]:
    """Sign-test p-value of every ordered pair ``i > j`` and which pairs were tested."""
    tested = h2h.games >= min_games
    np.fill_diagonal(tested, False)
    return np.where(tested, sign_test(h2h.wins, h2h.losses), 1.0), tested


def intransitive_cycles(h2h: HeadToHead, *, alpha: float = 0.05, min_games: int = 10,
                        correction: Literal["holm", "bh"] = "holm") -> list[Cycle]:
    """The significant 3-cycles of a board, most confident first.

    Args:
        h2h: Head-to-head counts of the board's agents.
        alpha: Level at which a cycle is reported (after adjustment).
        min_games: Pairs with fewer games are not tested (and their triples not in the family).
        correction: ``"holm"`` (family-wise error) or ``"bh"`` (false discovery rate).

    Returns:
        The cycles whose adjusted p-value is at most ``alpha``.
    """
    p, tested = _edge_p_values(h2h, min_games)
    triples, p_triple, forward_wins = _tested_triples(p, tested)
    if not len(triples):
        return []
    adjusted = holm(p_triple) if correction == "holm" else benjamini_hochberg(p_triple)
    cycles = []
    for t in np.flatnonzero(adjusted <= alpha):
        i, j, k = triples[t].tolist()
        order = (i, j, k) if forward_wins[t] else (i, k, j)
        edges = tuple(_edge(h2h, p, a, b) for a, b in zip(order, order[1:] + order[:1]))
        cycles.append(Cycle(agents=tuple(h2h.agents[x] for x in order), edges=edges,
                            p_value=float(p_triple[t]), adjusted_p=float(adjusted[t]),
                            confidence=float(1.0 - adjusted[t])))
    return sorted(cycles, key=lambda c: c.adjusted_p)


def _tested_triples(p: np.ndarray, tested: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every triple ``i < j < k`` whose three pairs were tested, its p-value, its orientation.

    Returns:
        ``(t, 3)`` triples, their p-values ``2 * min(forward, backward)`` (forward is
        ``i > j > k > i``, the larger of its three edge p-values), and whether forward
        is the better-supported orientation. One ``i`` at a time, vectorised over ``(j, k)``.
    """
    n = len(p)
    triples, p_triple, forward_wins = [], [], []
    for i in range(n - 2):
        j, k = np.nonzero(np.triu(tested[i + 1:, i + 1:], 1) & tested[i, i + 1:, None] & tested[i, None, i + 1:])
        j, k = j + i + 1, k + i + 1
        forward = np.maximum(np.maximum(p[i, j], p[j, k]), p[k, i])
        backward = np.maximum(np.maximum(p[i, k], p[k, j]), p[j, i])
        triples.append(np.stack([np.full(j.size, i), j, k], axis=1))
        p_triple.append(np.minimum(1.0, 2.0 * np.minimum(forward, backward)))
        forward_wins.append(forward <= backward)
    if not triples:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0), np.zeros(0, dtype=bool)
    return np.concatenate(triples), np.concatenate(p_triple), np.concatenate(forward_wins)


def _edge(h2h: HeadToHead, p: np.ndarray, a: int, b: int) -> Edge:
    return Edge(winner=h2h.agents[a], loser=h2h.agents[b], wins=int(h2h.wins[a, b]),
                draws=int(h2h.draws[a, b]), losses=int(h2h.losses[a, b]), p_value=float(p[a, b]))
