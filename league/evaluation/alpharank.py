"""alpha-Rank (Omidshafiei et al. 2019): rank agents by where evolution spends its time. Pure.

A population of ``m`` individuals all plays one agent; now and then a mutant playing
another agent appears and either takes over (fixates) or dies out, with a probability
set by how much better it fares against the incumbent, sharpened by the selection
intensity ``alpha``. The agents are the states of that Markov chain, and its
stationary distribution (the *mass*) ranks them: an agent that beats everyone holds
all of it; agents in a rock-paper-scissors cycle share it. Unlike a rating, nothing
assumes the board is a ladder, and the mass shows where it is not.

Model (the "local selection" model, OpenSpiel's default): a mutant ``r`` entering a
population of ``s`` has fitness advantage ``u = alpha * (P[r, s] - P[s, r])`` and
fixation probability ``rho = (1 - e^-u) / (1 - e^-(m u))`` (``1/m`` at ``u = 0``); the
chain moves from ``s`` to ``r`` with probability ``rho / (n - 1)``. Two populations
(role envs: hiders against seekers) give a chain over profiles ``(i, j)`` in which one
population at a time tries a mutant, probability ``rho / ((n1 - 1) + (n2 - 1))``, and
each agent's mass in its role is the marginal of the profile mass.

Large alpha: the paper ranks in the limit ``alpha -> inf``, where fixation
probabilities against the gradient fall below ``1e-308`` and a float chain becomes
reducible (OpenSpiel's eigenvector solver then raises or returns nan; its fixation
formula overflows from ``alpha * |du| ~ 700``). Here everything is computed in log
space: ``log rho`` in closed form with ``expm1``, and the stationary distribution by
the Grassmann-Taksar-Heyman state reduction (no subtractions, so it is accurate to
relative precision) done with ``logaddexp``. Any finite alpha works, 1e6 included, and
agents whose mass underflows are still ordered by their log mass.

Decision on OpenSpiel: ``open_spiel`` 2.0.2 has a cp311 wheel (16 MB, 52 MB installed,
pulls ``ml-collections``), but importing ``open_spiel.python.egt.alpharank`` loads the
C++ ``pyspiel`` extension, matplotlib and networkx (~1.2 s), and its code loops over
strategy pairs in Python with float fixation probabilities (the overflow above). So it
is a development dependency only: ``tests/league/evaluation/test_alpharank.py`` checks this module
against it at moderate alpha, where both are exact, to 1e-9.

Cost: single population ``O(n^3)`` (200 agents: ~0.1 s); two populations
``O((n1 n2)^3)`` (30 x 30 agents: a few seconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

__all__ = ["AlphaRank", "AlphaRankTwoPopulation", "alpharank", "alpharank_two_populations",
           "log_fixation_probability"]

DEFAULT_ALPHA = 100.0
DEFAULT_POPULATION = 50

Matrix = Sequence[Sequence[float]] | np.ndarray


@dataclass(frozen=True)
class AlphaRank:
    """alpha-Rank of one population.

    Attributes:
        mass: Stationary mass of each agent (sums to 1).
        log_mass: Natural log of ``mass``, finite even where ``mass`` underflows to 0.
        ranking: Agent indices, most mass first (ties keep index order).
        alpha: Selection intensity used.
        population_size: ``m`` used.
    """

    mass: np.ndarray
    log_mass: np.ndarray
    ranking: np.ndarray
    alpha: float
    population_size: int


@dataclass(frozen=True)
class AlphaRankTwoPopulation:
    """alpha-Rank of a two-population (two-role) game.

    Attributes:
        profile_mass: ``(n1, n2)`` stationary mass of each profile (sums to 1).
        roles: One :class:`AlphaRank` per population: each agent's marginal mass in
            its role (``roles[0]`` rows, ``roles[1]`` columns).
    """

    profile_mass: np.ndarray
    roles: tuple[AlphaRank, AlphaRank]


def log_fixation_probability(u: np.ndarray, population_size: int) -> np.ndarray:
    """``log rho(u)``, ``rho = (1 - e^-u) / (1 - e^-(m u))``, accurate for any finite ``u``.

    For ``u < 0`` the ratio is rewritten as ``e^-((m-1)|u|) (1 - e^-|u|) / (1 - e^-(m|u|))``
    so nothing overflows; ``u = 0`` gives the neutral ``log(1/m)``.
    """
    m = population_size
    u = np.asarray(u, dtype=np.float64)
    a = np.abs(u)
    tiny = a < 1e-12
    safe = np.where(tiny, 1.0, a)
    with np.errstate(divide="ignore"):
        base = np.log(-np.expm1(-safe)) - np.log(-np.expm1(-m * safe))
    out = base - (m - 1) * np.maximum(-u, 0.0)
    return np.where(tiny, -np.log(m), out)


def _log_stationary(log_p: np.ndarray) -> np.ndarray:
    """Log stationary distribution of an irreducible chain from its log transition matrix.

    Grassmann-Taksar-Heyman: eliminate states from the last, folding each one's
    transitions into the others; only off-diagonal entries are read.
    """
    lp = log_p.copy()
    n = len(lp)
    np.fill_diagonal(lp, -np.inf)
    for k in range(n - 1, 0, -1):
        out_k = logsumexp(lp[k, :k])
        if not np.isfinite(out_k):
            raise ValueError("the chain is reducible: some state cannot reach the others")
        lp[:k, k] -= out_k
        np.logaddexp(lp[:k, :k], lp[:k, k, None] + lp[None, k, :k], out=lp[:k, :k])
    log_pi = np.full(n, -np.inf)
    log_pi[0] = 0.0
    for k in range(1, n):
        log_pi[k] = logsumexp(log_pi[:k] + lp[:k, k])
    return log_pi - logsumexp(log_pi)


def _ranked(log_mass: np.ndarray, alpha: float, m: int) -> AlphaRank:
    return AlphaRank(mass=np.exp(log_mass), log_mass=log_mass,
                     ranking=np.argsort(-log_mass, kind="stable"), alpha=alpha, population_size=m)


def _check(alpha: float, population_size: int) -> None:
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be finite and >= 0, got {alpha}")
    if population_size < 2:
        raise ValueError(f"population_size must be >= 2, got {population_size}")


def alpharank(payoff: Matrix, alpha: float = DEFAULT_ALPHA,
              population_size: int = DEFAULT_POPULATION) -> AlphaRank:
    """alpha-Rank of a symmetric game, e.g. a board's win-rate matrix.

    Args:
        payoff: ``(n, n)``; ``payoff[i, j]`` is what ``i`` gets against ``j`` (a win rate;
            ``nan`` - never played - and the diagonal count as even, 0.5).
        alpha: Selection intensity; larger approaches the paper's infinite-alpha ranking.
        population_size: ``m``, individuals per population.

    Returns:
        Mass, log mass and ranking of every agent.
    """
    _check(alpha, population_size)
    p = np.asarray(payoff, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] == 0:
        raise ValueError(f"payoff must be a non-empty square matrix, got shape {p.shape}")
    p = np.where(np.isnan(p), 0.5, p)
    np.fill_diagonal(p, 0.5)
    n = len(p)
    if n == 1:
        return _ranked(np.zeros(1), alpha, population_size)
    # Row s (incumbent), column r (mutant): u = alpha * (P[r, s] - P[s, r]).
    log_c = log_fixation_probability(alpha * (p.T - p), population_size) - np.log(n - 1)
    return _ranked(_log_stationary(log_c), alpha, population_size)


def alpharank_two_populations(payoff_first: Matrix, payoff_second: Matrix, alpha: float = DEFAULT_ALPHA,
                              population_size: int = DEFAULT_POPULATION) -> AlphaRankTwoPopulation:
    """alpha-Rank of a two-role game (hiders against seekers, predators against prey).

    Args:
        payoff_first: ``(n1, n2)``: what role-1 agent ``i`` gets against role-2 agent ``j``.
        payoff_second: ``(n1, n2)``: what role-2 agent ``j`` gets against role-1 agent ``i``
            (``1 - payoff_first`` for win rates).
        alpha: Selection intensity.
        population_size: ``m``, individuals per population.

    Returns:
        Profile mass and each role's marginal ranking.
    """
    _check(alpha, population_size)
    a, b = (np.asarray(x, dtype=np.float64) for x in (payoff_first, payoff_second))
    if a.ndim != 2 or a.shape != b.shape or 0 in a.shape:
        raise ValueError(f"both payoffs must be the same non-empty (n1, n2) shape, got {a.shape}, {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("payoffs must be finite")
    n1, n2 = a.shape
    if n1 * n2 == 1:
        one = _ranked(np.zeros(1), alpha, population_size)
        return AlphaRankTwoPopulation(np.ones((1, 1)), (one, one))
    log_eta = -np.log((n1 - 1) + (n2 - 1))
    # States (i, j) flattened as i * n2 + j; only one population changes per move.
    log_c = np.full((n1, n2, n1, n2), -np.inf)
    i, j = np.arange(n1), np.arange(n2)
    # Population 1 mutates i -> k against j: u = alpha * (A[k, j] - A[i, j]).
    du1 = a[None, :, :] - a[:, None, :]  # [i, k, j]
    log_c[i[:, None, None], j[None, None, :], i[None, :, None], j[None, None, :]] = (
        log_fixation_probability(alpha * du1, population_size) + log_eta)
    # Population 2 mutates j -> l against i: u = alpha * (B[i, l] - B[i, j]).
    du2 = b[:, None, :] - b[:, :, None]  # [i, j, l]
    log_c[i[:, None, None], j[None, :, None], i[:, None, None], j[None, None, :]] = (
        log_fixation_probability(alpha * du2, population_size) + log_eta)
    log_pi = _log_stationary(log_c.reshape(n1 * n2, n1 * n2)).reshape(n1, n2)
    roles = (_ranked(logsumexp(log_pi, axis=1), alpha, population_size),
             _ranked(logsumexp(log_pi, axis=0), alpha, population_size))
    return AlphaRankTwoPopulation(np.exp(log_pi), roles)
