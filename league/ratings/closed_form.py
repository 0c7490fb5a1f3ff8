"""Closed-form TrueSkill 1v1 update, scalar and vectorized, equal to the package.

For two players the TrueSkill factor graph has a single truncation factor, so message
passing converges after one pass to the textbook closed form::

    s_i^2 = sigma_i^2 + tau^2                     (dynamics noise first)
    c^2   = s_w^2 + s_l^2 + 2 beta^2,   t = (mu_w - mu_l) / c,   e = margin / c
    mu_w' = mu_w + s_w^2 / c * v(t, e)            mu_l' = mu_l - s_l^2 / c * v(t, e)
    sigma_i'^2 = s_i^2 * (1 - s_i^2 / c^2 * w(t, e))

with v/w the win or draw truncation functions and ``margin`` the draw margin of the
environment (computed once per :class:`~league.ratings.rating.RatingEnv`).

To agree with ``trueskill.rate_1vs1`` to ~1e-12 we copy the package's numerics
exactly rather than using ``math.erfc``: its default backend builds the normal cdf on
a polynomial erfc approximation (relative error ~1e-7), and v is the plain ratio
pdf/cdf, so an exact erfc would differ from the package by ~1e-7.

Fallback: where that arithmetic loses accuracy (far tails: the ratio pdf/cdf of two
approximated tails, and ``v * (v + x)`` cancelling for large negative ``x``) or where
the package itself would raise, we do not trust the closed form and let the package
rate the match (:func:`league.ratings.rating.rate_teams` with two teams of one, exactly
what ``trueskill.rate_1vs1`` runs; mpmath on overflow). So the fast path returns what
the package returns, everywhere, and is the one 1v1 update of the code base.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import NamedTuple, TypeVar

import numpy as np

from league.ratings.rating import Rating, RatingEnv, rate_teams

K = TypeVar("K", bound=Hashable)

# Beyond these the package's float arithmetic degrades (relative error of w grows like
# x^2 * 1e-16 and the approximated tails' ratio drifts) and it raises FloatingPointError
# from x ~ -38 on. Inside them the closed form matches the package to ~1e-11
# (tests/league/ratings/test_rating.py checks both sides of the boundary).
TRUSTED_MIN_WIN_X = -20.0
"""Smallest ``x = t - e`` (win) handled in closed form."""
TRUSTED_MAX_DRAW_ABS_T = 20.0
"""Largest ``|t|`` (draw) handled in closed form."""

# Coefficients of the package's erfc (Numerical Recipes' erfcc, Chebyshev fit), in
# Horner order from the innermost term outwards.
_ERFC_POLY = (
    0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
    -0.18628806, 0.09678418, 0.37409196, 1.00002368,
)  # fmt: skip
_ERFC_CONST = -1.26551223
_SQRT2 = math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _erfc(x: float) -> float:
    """The package's erfc, operation for operation (so results agree to the bit)."""
    z = abs(x)
    t = 1.0 / (1.0 + z / 2.0)
    # Unrolled (the scalar path is the hot loop of ladder replays); same as _ERFC_POLY.
    # fmt: off
    r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
        0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
            1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    # fmt: on
    return 2.0 - r if x < 0 else r


def _erfc_array(x: np.ndarray) -> np.ndarray:
    """Vectorized :func:`_erfc`."""
    z = np.abs(x)
    t = 1.0 / (1.0 + z / 2.0)
    poly = np.zeros_like(t)
    for coeff in _ERFC_POLY:
        poly = t * (coeff + poly)
    r = t * _exp(-z * z + _ERFC_CONST + poly)
    return np.where(x < 0, 2.0 - r, r)


def _exp(x: np.ndarray) -> np.ndarray:
    """``math.exp`` of every element.

    Not ``np.exp``: numpy's SIMD exp differs from libm's in the last bit for ~5% of
    inputs, and the vectorized update must equal :func:`rate_1v1_fast` bit for bit (a
    batch rated in waves must give what replaying the log one match at a time gives).
    """
    return np.fromiter(map(math.exp, x.ravel().tolist()), float, x.size).reshape(x.shape)


def _v_w_win(t: float, eps: float) -> tuple[float, float] | None:
    """Win v and w as the package computes them; None where it would raise."""
    x = t - eps
    cdf = 0.5 * _erfc(-x / _SQRT2)
    if x < TRUSTED_MIN_WIN_X or cdf == 0.0:
        return None
    v = _INV_SQRT_2PI * math.exp(-(x * x) / 2) / cdf
    w = v * (v + x)
    return (v, w) if 0.0 < w < 1.0 else None


def _v_w_draw(t: float, eps: float) -> tuple[float, float] | None:
    """Draw v and w as the package computes them; None where it would fail."""
    abs_t = abs(t)
    a, b = eps - abs_t, -eps - abs_t
    denom = 0.5 * _erfc(-a / _SQRT2) - 0.5 * _erfc(-b / _SQRT2)
    if abs_t > TRUSTED_MAX_DRAW_ABS_T or denom == 0.0:
        return None
    pdf_a = _INV_SQRT_2PI * math.exp(-(a * a) / 2)
    pdf_b = _INV_SQRT_2PI * math.exp(-(b * b) / 2)
    v = (pdf_b - pdf_a) / denom
    w = v * v + (a * pdf_a - b * pdf_b) / denom
    return (-v if t < 0 else v, w) if 0.0 < w < 1.0 else None


def _package_1v1(winner: Rating, loser: Rating, drawn: bool, env: RatingEnv) -> tuple[Rating, Rating]:
    """The package's 1v1 update (its factor graph, then mpmath), for the untrusted region."""
    (new_w,), (new_l,) = rate_teams([[winner], [loser]], [0, 0 if drawn else 1], env=env)
    return new_w, new_l


def rate_1v1_fast(
    winner: Rating, loser: Rating, drawn: bool = False, *, env: RatingEnv
) -> tuple[Rating, Rating]:
    """TrueSkill's 1v1 update, ~50x faster per call than the package's (which it equals).

    Args:
        winner: Rating of the winner (or of the first player when ``drawn``).
        loser: Rating of the loser (or of the second player when ``drawn``).
        drawn: Whether the match was a draw.
        env: The ladder's rating environment.

    Returns:
        The new ``(winner, loser)`` ratings.
    """
    tau_sq = env.tau * env.tau
    var_w = winner.sigma * winner.sigma + tau_sq
    var_l = loser.sigma * loser.sigma + tau_sq
    c_sq = var_w + var_l + 2.0 * env.beta * env.beta
    c = math.sqrt(c_sq)
    t, eps = (winner.mu - loser.mu) / c, env.draw_margin_1v1 / c
    vw = _v_w_draw(t, eps) if drawn else _v_w_win(t, eps)
    if vw is None:  # outside the trusted region: let the package (or mpmath) decide
        return _package_1v1(winner, loser, drawn, env)
    v, w = vw
    return (
        Rating(winner.mu + var_w / c * v, math.sqrt(var_w * (1.0 - var_w / c_sq * w))),
        Rating(loser.mu - var_l / c * v, math.sqrt(var_l * (1.0 - var_l / c_sq * w))),
    )


def _v_w_arrays(t: np.ndarray, eps: np.ndarray, drawn: np.ndarray) -> tuple[np.ndarray, ...]:
    """Vectorized v, w and a mask of elements the closed form can be trusted with.

    Each element is computed with the scalar path's operations in the same order
    (:func:`_v_w_win`, :func:`_v_w_draw`), so it agrees with it to the bit; the win and
    draw formulas each run on their own elements only.
    """
    shape = t.shape
    t, eps, drawn = t.ravel(), eps.ravel(), drawn.ravel()
    v, w, trusted = np.zeros_like(t), np.zeros_like(t), np.zeros(t.shape, dtype=bool)
    win, draw = np.flatnonzero(~drawn), np.flatnonzero(drawn)
    # Zero denominators only occur outside the trusted region; silence, then mask.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if win.size:
            x = t[win] - eps[win]
            cdf_x = 0.5 * _erfc_array(-x / _SQRT2)
            v_win = _INV_SQRT_2PI * _exp(-(x * x) / 2) / cdf_x
            w_win = v_win * (v_win + x)
            v[win], w[win] = v_win, w_win
            trusted[win] = (x >= TRUSTED_MIN_WIN_X) & (w_win > 0.0) & (w_win < 1.0) & np.isfinite(v_win)
        if draw.size:
            t_d = t[draw]
            abs_t = np.abs(t_d)
            a, b = eps[draw] - abs_t, -eps[draw] - abs_t
            denom = 0.5 * _erfc_array(-a / _SQRT2) - 0.5 * _erfc_array(-b / _SQRT2)
            pdf_a = _INV_SQRT_2PI * _exp(-(a * a) / 2)
            pdf_b = _INV_SQRT_2PI * _exp(-(b * b) / 2)
            v_abs = (pdf_b - pdf_a) / denom
            w_draw = v_abs * v_abs + (a * pdf_a - b * pdf_b) / denom
            v[draw], w[draw] = np.where(t_d < 0, -v_abs, v_abs), w_draw
            trusted[draw] = ((abs_t <= TRUSTED_MAX_DRAW_ABS_T) & (w_draw > 0.0) & (w_draw < 1.0)
                             & np.isfinite(v_abs))
    return v.reshape(shape), w.reshape(shape), trusted.reshape(shape)


def rate_1v1_arrays(
    winner_mu: np.ndarray,
    winner_sigma: np.ndarray,
    loser_mu: np.ndarray,
    loser_sigma: np.ndarray,
    drawn: np.ndarray | bool = False,
    *,
    env: RatingEnv,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized closed-form 1v1 update of many *independent* matches at once.

    Element ``i`` equals ``rate_1v1_fast(Rating(winner_mu[i], winner_sigma[i]), ...)``
    bit for bit. Use :func:`apply_results` (or
    :meth:`league.ratings.book.RatingBook.apply_batch`, which cuts a log into waves of
    independent matches) when matches share players: order matters then.

    Args:
        winner_mu: Means of the winners (first players of draws).
        winner_sigma: Standard deviations of the winners.
        loser_mu: Means of the losers.
        loser_sigma: Standard deviations of the losers.
        drawn: Per-match draw flags (or one flag for all).
        env: The ladder's rating environment.

    Returns:
        New ``(winner_mu, winner_sigma, loser_mu, loser_sigma)`` as float arrays.
    """
    mu_w, sd_w, mu_l, sd_l, drawn_ = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (winner_mu, winner_sigma, loser_mu, loser_sigma)),
        np.asarray(drawn, dtype=bool),
    )
    tau_sq = env.tau * env.tau
    var_w = sd_w * sd_w + tau_sq
    var_l = sd_l * sd_l + tau_sq
    c_sq = var_w + var_l + 2.0 * env.beta * env.beta
    c = np.sqrt(c_sq)
    v, w, trusted = _v_w_arrays((mu_w - mu_l) / c, env.draw_margin_1v1 / c, drawn_)
    with np.errstate(invalid="ignore"):  # untrusted slots are overwritten below
        out = (
            mu_w + var_w / c * v,
            np.sqrt(var_w * (1.0 - var_w / c_sq * w)),
            mu_l - var_l / c * v,
            np.sqrt(var_l * (1.0 - var_l / c_sq * w)),
        )
    for i in np.flatnonzero(~trusted):
        new_w, new_l = _package_1v1(
            Rating(float(mu_w[i]), float(sd_w[i])), Rating(float(mu_l[i]), float(sd_l[i])), bool(drawn_[i]), env
        )
        out[0][i], out[1][i], out[2][i], out[3][i] = new_w.mu, new_w.sigma, new_l.mu, new_l.sigma
    return out


class Result1v1(NamedTuple):
    """One head-to-head result of a ladder's match log."""

    winner: Hashable
    loser: Hashable
    drawn: bool = False


def apply_results(
    ratings: Mapping[K, Rating], results: Iterable[Result1v1], *, env: RatingEnv
) -> dict[K, Rating]:
    """Replays 1v1 results in order on top of ``ratings`` (e.g. a ladder's match log).

    Sequential on purpose: a match is rated with the ratings its players had after
    every earlier match, exactly as if each result had been rated as it came in.

    Args:
        ratings: Current ratings; not modified.
        results: Results in the order the matches finished.
        env: The ladder's rating environment; unknown players start at its prior.

    Returns:
        A new dict with the ratings after the last result.
    """
    current: dict = dict(ratings)
    for winner, loser, drawn in results:
        if winner == loser:
            raise ValueError(f"{winner!r} cannot play itself")
        prior = env.new_rating()
        old_w, old_l = current.get(winner, prior), current.get(loser, prior)
        current[winner], current[loser] = rate_1v1_fast(old_w, old_l, drawn, env=env)
    return current
