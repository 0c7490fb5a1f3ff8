"""Integrity flags: pairs that throw games to each other, ratings that rest on one opponent. Pure.

Two signals, both with the evidence an admin needs to judge them. A flag is a reason
to look, not proof: a genuine rock-paper-scissors edge also beats the ratings'
prediction (``league.evaluation.cycles`` shows those).

**Suspicious pairs** (:func:`suspicious_pairs`). TrueSkill predicts each pair's result
from the two ratings: with ``c^2 = 2 beta^2 + sigma_a^2 + sigma_b^2`` and draw margin
``eps``, ``P(a wins) = Phi((mu_a - mu_b - eps) / c)`` and ``P(b wins)`` likewise. The
ratings used are both agents' ratings replayed *without their games against each
other* (below): with the final ratings, the more games a pair throws, the more the
ratings absorb them and "predict" the thrown result. On the pair's decisive games
(draws left out), ``a``'s wins are binomial with ``q = P(a wins | decisive)``. Ratings
are a model, and at large rating gaps the model's ``q`` is 0.999 where the truth is
0.99; an overrated partner also loses more than predicted to everyone; so the null
hypothesis is "within ``tolerance`` of the prediction", ``|q_true - q| <= tolerance``,
tested exactly against the nearer edge of that band and doubled (two-sided). A thrown
pairing is far outside any such band. Pairs with fewer than ``min_games`` decisive
games are not tested. Same-owner pairs are a family of their own (fewer tests, so more
power where throwing is cheapest); all other pairs form the second; Holm adjusts
within each family, and a pair is flagged when its adjusted p-value is at most
``alpha``. Flags are found one at a time and each flagged pair's games leave the
replays before the rest are tested again (see :func:`suspicious_pairs`).

**Rating dependence**: see :mod:`league.evaluation.rating_dependence`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from league.evaluation.headtohead import Game, HeadToHead
from league.evaluation.rating_dependence import LeaveOneOut, RatedMatch, leave_one_out_ratings
from league.evaluation.significance import holm
from league.ratings.rating import Rating, RatingEnv

__all__ = ["PairFlag", "expected_outcome", "suspicious_pairs"]


@dataclass(frozen=True)
class PairFlag:
    """A pair whose head-to-head results are far from what their ratings predict.

    Attributes:
        beneficiary: The agent that scored above the prediction.
        thrower: The agent that scored below it.
        same_owner: Both agents belong to one owner.
        family: ``"same_owner"`` or ``"other"``: the family the pair was adjusted in.
        wins: ``beneficiary``'s wins against ``thrower``.
        draws: Their draws.
        losses: ``beneficiary``'s losses against ``thrower``.
        expected_win_share: Predicted share of decisive games won by ``beneficiary``.
        observed_win_share: Observed share.
        expected_score: Predicted points per game of ``beneficiary`` (draws half).
        observed_score: Observed points per game.
        p_value: Two-sided p-value against the tolerance band, before adjustment.
        adjusted_p: Holm-adjusted within ``family``.
    """

    beneficiary: Hashable
    thrower: Hashable
    same_owner: bool
    family: str
    wins: int
    draws: int
    losses: int
    expected_win_share: float
    observed_win_share: float
    expected_score: float
    observed_score: float
    p_value: float
    adjusted_p: float


def expected_outcome(a: Rating, b: Rating, env: RatingEnv) -> tuple[float, float]:
    """TrueSkill's predicted ``(P(a wins), P(b wins))``; the rest is the draw chance."""
    c = math.sqrt(2 * env.beta**2 + a.sigma**2 + b.sigma**2)
    eps = env.draw_margin_1v1
    return float(ndtr((a.mu - b.mu - eps) / c)), float(ndtr((b.mu - a.mu - eps) / c))


def _band_p_value(wins: int, decisive: int, q: float, tolerance: float) -> float:
    """Two-sided exact p-value of ``wins`` out of ``decisive`` against ``|q_true - q| <= tolerance``."""
    from scipy.stats import binom  # loaded on first use: importing scipy.stats costs ~0.4 s

    observed = wins / decisive
    if abs(observed - q) <= tolerance:
        return 1.0
    if observed > q:
        edge = min(1.0, q + tolerance)
        one_sided = binom.sf(wins - 1, decisive, edge)
    else:
        edge = max(0.0, q - tolerance)
        one_sided = binom.cdf(wins, decisive, edge)
    return float(min(1.0, 2.0 * one_sided))


class _PairTest(NamedTuple):
    i: int
    j: int
    q: float  # predicted share of decisive games won by agents[i]
    expected: float  # predicted points per game of agents[i]
    p: float
    same_owner: bool


def _pair_tests(h2h: HeadToHead, replays: Mapping[Hashable, LeaveOneOut], pairs: Iterable[tuple[int, int]],
                owners: Mapping[Hashable, Hashable | None], env: RatingEnv, tolerance: float) -> list[_PairTest]:
    tests = []
    for i, j in pairs:
        a, b = h2h.agents[i], h2h.agents[j]
        wins, losses = int(h2h.wins[i, j]), int(h2h.losses[i, j])
        p_i, p_j = expected_outcome(replays[a].without(b), replays[b].without(a), env)
        q = p_i / (p_i + p_j)
        owner = owners.get(a)
        tests.append(_PairTest(i, j, q, p_i + 0.5 * (1 - p_i - p_j), _band_p_value(wins, wins + losses, q, tolerance),
                               owner is not None and owner == owners.get(b)))
    return tests


def suspicious_pairs(matches: Sequence[RatedMatch], owners: Mapping[Hashable, Hashable | None] | None = None,
                     *, env: RatingEnv | None = None, alpha: float = 0.01, tolerance: float = 0.2,
                     min_games: int = 10) -> list[PairFlag]:
    """Pairs whose head-to-head deviates from their ratings' prediction, in the order found.

    Each pair is predicted from both agents' ratings replayed without their games
    against each other (:func:`~league.evaluation.rating_dependence.leave_one_out_ratings`), so the
    games under test do not pull the prediction towards themselves. Flags are found
    one at a time, Holm step-down: the most significant pair (adjusted within its
    family) is flagged if at most ``alpha``, its games are dropped from every later
    replay - an overrated partner would otherwise make every honest opponent look
    suspicious - and the remaining pairs are tested again.

    Args:
        matches: Rated 1v1 matches of one ladder (env and role), in the order they were rated.
        owners: Each agent's owner id (``None``/missing: no owner, never "same owner").
        env: The ladder's rating environment (beta, draw margin); the default ladder's if None.
        alpha: Family-wise significance level of a flag.
        tolerance: Deviation from the predicted decisive-game win share that is not
            suspicious (model error).
        min_games: Minimum decisive games for a pair to be tested.
    """
    env = env or RatingEnv()
    owners = owners or {}
    matches = list(matches)
    h2h = HeadToHead.from_games(Game(m.a, m.b, m.score) for m in matches)
    open_pairs = {(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(h2h.wins + h2h.losses >= min_games, 1)))}
    flagged: list[PairFlag] = []
    dropped: set[frozenset] = set()
    while open_pairs:
        kept = [m for m in matches if frozenset((m.a, m.b)) not in dropped]
        tests = _pair_tests(h2h, leave_one_out_ratings(kept, env=env), sorted(open_pairs), owners, env, tolerance)
        best: tuple[float, _PairTest] | None = None
        for same in (True, False):
            family = [t for t in tests if t.same_owner == same]
            for test, adjusted in zip(family, holm([t.p for t in family])):
                if adjusted <= alpha and (best is None or adjusted < best[0]):
                    best = (float(adjusted), test)
        if best is None:
            break
        adjusted, test = best
        flagged.append(_pair_flag(h2h, test, adjusted))
        open_pairs.discard((test.i, test.j))
        dropped.add(frozenset((h2h.agents[test.i], h2h.agents[test.j])))
    return flagged


def _pair_flag(h2h: HeadToHead, test: _PairTest, adjusted: float) -> PairFlag:
    i, j, q, expected, p, same = test
    wins, draws, losses = (int(m[i, j]) for m in (h2h.wins, h2h.draws, h2h.losses))
    if wins / (wins + losses) < q:  # j is the one above the prediction
        i, j, q, expected, wins, losses = j, i, 1 - q, 1 - expected, losses, wins
    games = wins + draws + losses
    return PairFlag(beneficiary=h2h.agents[i], thrower=h2h.agents[j], same_owner=same,
                    family="same_owner" if same else "other", wins=wins, draws=draws, losses=losses,
                    expected_win_share=q, observed_win_share=wins / (wins + losses),
                    expected_score=expected, observed_score=(wins + 0.5 * draws) / games,
                    p_value=p, adjusted_p=adjusted)
