"""Nash averaging (Balduzzi et al. 2018, "Re-evaluating evaluation"). Pure.

Average win rate (and a rating fitted to all games) rewards an agent for beating
whoever happens to be on the board: add ten copies of a weak agent and everyone who
beats it climbs. Nash averaging is invariant to that. It takes the antisymmetric
meta-game ``A`` (``A[i, j] > 0``: ``i`` is favoured against ``j``; by default the log
odds of the smoothed win rates), finds the **maximum-entropy Nash equilibrium** ``p*``
of that symmetric zero-sum game - the unique equilibrium spreading its mass as evenly
as the game allows, so copies of an agent share one agent's mass - and scores each
agent by its payoff against that mixture, ``skill = A p*``.

Reading it: the game's value is 0, so no agent scores above 0; agents in the
equilibrium's support score exactly 0 (nobody on the board beats the mixture of
them), the rest are negative by how much the mixture beats them.

Computation. The equilibria are the polytope ``{p in simplex : A p <= 0}``.
1. Its maximal support ``S`` (the union of all equilibria's supports) comes from one
   linear program per agent not yet seen in a support (maximise ``p_i``; HiGHS).
   Every equilibrium gives every agent of ``S`` payoff exactly 0, so ``A[S, S] p = 0``.
2. On the affine set ``{p_S : A[S, S] p_S = 0, sum p_S = 1}``, parametrised by a
   null-space basis, SLSQP maximises the entropy subject to ``p_S >= 0`` and
   ``A[out, S] p_S <= 0``, from the centroid of the step-1 solutions (a strictly
   positive equilibrium on ``S``). The entropy is strictly concave, so the optimum is
   unique; we check its equilibrium conditions before returning it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from league.evaluation.headtohead import HeadToHead

__all__ = ["NashAverage", "max_entropy_nash", "nash_average", "nash_average_head_to_head"]

_TOL = 1e-9  # equilibrium conditions hold to this (LP and SLSQP tolerances are finer)


@dataclass(frozen=True)
class NashAverage:
    """Nash-averaged evaluation of a population.

    Attributes:
        mixture: The maximum-entropy Nash mixture over agents (sums to 1).
        skill: Each agent's payoff against ``mixture``; 0 for the unbeaten, negative otherwise.
        ranking: Agent indices, best skill first (ties keep index order).
        payoff: The antisymmetric meta-game the mixture solves.
    """

    mixture: np.ndarray
    skill: np.ndarray
    ranking: np.ndarray
    payoff: np.ndarray


def _max_support(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the supports of all equilibria, and a strictly positive equilibrium on it."""
    from scipy.optimize import linprog  # loaded on first use: the service starts without it

    n = len(a)
    a_eq, b_eq = np.ones((1, n)), [1.0]
    support = np.zeros(n, dtype=bool)
    points = []
    for i in range(n):
        if support[i]:
            continue
        cost = np.zeros(n)
        cost[i] = -1.0
        res = linprog(cost, A_ub=a, b_ub=np.zeros(n), A_eq=a_eq, b_eq=b_eq, bounds=[(0, None)] * n,
                      method="highs")
        if res.status != 0:  # the polytope of a finite antisymmetric game is never empty
            raise RuntimeError(f"linear program failed: {res.message}")
        if res.x[i] > _TOL:
            points.append(np.clip(res.x, 0.0, None))
            support |= res.x > _TOL
    centre = np.mean(points, axis=0)
    centre[~support] = 0.0
    return support, centre / centre.sum()


def max_entropy_nash(payoff: np.ndarray) -> np.ndarray:
    """The maximum-entropy Nash equilibrium of the symmetric zero-sum game ``payoff``.

    Args:
        payoff: ``(n, n)`` antisymmetric, finite.

    Returns:
        The equilibrium mixture.

    Raises:
        ValueError: Not square, not finite or not antisymmetric.
    """
    a = np.asarray(payoff, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"payoff must be a non-empty square matrix, got shape {a.shape}")
    if not np.isfinite(a).all() or not np.allclose(a, -a.T, atol=1e-12):
        raise ValueError("payoff must be finite and antisymmetric (payoff == -payoff.T)")
    from scipy.linalg import null_space

    support, start = _max_support(a)
    s, out = np.flatnonzero(support), np.flatnonzero(~support)
    basis = null_space(np.vstack([a[np.ix_(s, s)], np.ones((1, s.size))]))
    p_s = start[s]
    if basis.shape[1] > 0:
        p_s = _maximise_entropy(p_s, basis, a[np.ix_(out, s)])
    mixture = np.zeros(len(a))
    mixture[s] = np.clip(p_s, 0.0, None)
    mixture /= mixture.sum()
    if (a @ mixture).max() > 1e-6 * max(1.0, np.abs(a).max()):
        raise RuntimeError("entropy maximisation left the equilibrium set")
    return mixture


def _maximise_entropy(p0: np.ndarray, basis: np.ndarray, a_out: np.ndarray) -> np.ndarray:
    """Maximise ``H(p0 + basis z)`` over ``z`` with ``p >= 0`` and ``a_out p <= 0``."""
    from scipy.optimize import minimize

    def negative_entropy(z: np.ndarray) -> tuple[float, np.ndarray]:
        p = np.clip(p0 + basis @ z, 1e-300, None)
        log_p = np.log(p)
        return float(p @ log_p), basis.T @ (log_p + 1.0)

    constraints = [{"type": "ineq", "fun": lambda z: p0 + basis @ z, "jac": lambda z: basis}]
    if a_out.size:
        g = a_out @ basis
        constraints.append({"type": "ineq", "fun": lambda z: -(a_out @ (p0 + basis @ z)), "jac": lambda z: -g})
    res = minimize(negative_entropy, np.zeros(basis.shape[1]), jac=True, method="SLSQP",
                   constraints=constraints, options={"ftol": 1e-14, "maxiter": 500})
    return p0 + basis @ res.x


def nash_average(payoff: np.ndarray) -> NashAverage:
    """Nash averaging of an antisymmetric meta-game.

    Args:
        payoff: ``(n, n)`` antisymmetric: ``payoff[i, j]`` is ``i``'s advantage over ``j``.

    Returns:
        The maximum-entropy Nash mixture, every agent's skill against it and the ranking.
    """
    a = np.asarray(payoff, dtype=np.float64)
    mixture = max_entropy_nash(a)
    skill = a @ mixture
    skill[np.abs(skill) < _TOL] = 0.0  # agents the mixture cannot beat: exactly even
    return NashAverage(mixture=mixture, skill=skill, ranking=np.argsort(-skill, kind="stable"), payoff=a)


def nash_average_head_to_head(h2h: HeadToHead, prior_games: float = 1.0) -> NashAverage:
    """Nash averaging of a board on the log odds of its smoothed win rates.

    Args:
        h2h: The board's head-to-head counts.
        prior_games: Virtual even games per pair (see :meth:`HeadToHead.smoothed_win_rate`);
            keeps logits finite and pairs that never met at 0.

    Returns:
        See :func:`nash_average`; skills are in log-odds units.
    """
    return nash_average(h2h.logits(prior_games))
