"""The final evaluation's stopping rule: when are the top K's ranks certified? Pure.

Input: the frozen pool's entry ids and the games played among them, in match-log order
(:class:`~league.evaluation.headtohead.Game`: seat-ordered ids and the first seat's score 1, 1/2 or
0). Output: a :class:`Certificate`: the standings, rank ranges, and for the pairs the
rule tests whether each is *separated*, *tied*, *reversed* or *open*, and whether the
evaluation is certified. The same games in the same order give the same certificate
(the verifier recomputes it from the match-log export). The order must be the order the
games were scheduled in (the match sequence), not the order they finished: a batch
sorted by finishing time would put quick wins first and let outcomes leak into the order.

Standings: TrueSkill from the prior over these games in log order, through the ladder's
one rating code (:class:`~league.ratings.book.RatingBook`), ranked by ``mu`` (ties: pool
order). Rank ranges: :func:`league.ratings.ranking.rank_ranges` of the 95% intervals. Sorting by
``mu`` rather than ``mu - 3 sigma``: the schedule plays the top far more than the rest,
and a conservative score would reward being played.

What is certified (the pairs tested): for ``r = 1..K`` the entries ranked ``r`` and
``r + 1`` (the last pair decides who is in the top K), and the K-th against every
*challenger*, an entry ranked below ``K + 1`` whose TrueSkill rank range still reaches
``K``. A pair's claim is about its own head-to-head: the upper entry's expected score
``p`` against the lower, seats averaged (wins plus half the draws):

* **separated** ``p > 1/2``; **reversed** ``p < 1/2`` (head to head contradicts the
  rating order: play on); **tied** ``1/2 - margin < p < 1/2 + margin``; else **open**.

A tested chain is a total order under stochastic transitivity (no cycles); a cycle shows
as a reversed pair. Non-adjacent pairs inside the top K are not tested directly.

The statistic (:mod:`league.competitions.confidence`): a pair's games form *units*, its
``k``-th game with the upper entry seated first and its ``k``-th with it seated second,
whose mean score has mean ``p`` exactly, whatever the first-move advantage (a leftover
game waits for its partner). Games of one seating are independent and identically
distributed, and the schedule decides whom to play before seeing the result, so the
units are i.i.d. (Doob's optional skipping). On them, two betting confidence sequences
(a lower and an upper bound), each at level ``alpha / (2M)`` with ``M = N (N - 1) / 2``
the pairs of the pool: a union bound over every pair the rule could ever test, since
which pairs are adjacent depends on the data. With probability at least ``1 - alpha``
every bound of every pair holds at every time at once, so every claim ever made is true
however often the evaluation looks and whenever it stops. A pair's ``confidence`` is
the largest ``1 - alpha`` at which its status holds (``1 - 2M / wealth``).

Certified: every tested pair separated or tied, and every entry has played ``floor``
games (TrueSkill's order, which picks the pairs, needs a fair look at everyone).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum

import numpy as np

from league.competitions import confidence
from league.evaluation.headtohead import Game
from league.ratings.book import MatchResult, RatingBook
from league.ratings.ranking import interval_bounds, rank_ranges
from league.ratings.rating import RatingEnv

__all__ = ["FINAL_RATING_ENV", "Certificate", "CertificationConfig", "EntryStanding", "FinalEvaluation",
           "PairCertificate", "PairStatus", "certify"]

ROLE = "player"
FINAL_RATING_ENV = RatingEnv(tau=0.0, draw_probability=0.01)
"""TrueSkill of a final evaluation: the live constants but no drift (the pool is frozen)."""


@dataclass(frozen=True)
class CertificationConfig:
    """The rule's knobs (set per competition, frozen when it opens).

    Attributes:
        top_k: K: the ranks certified.
        confidence: ``1 - alpha``: the joint level of every claim of the evaluation.
        tie_margin: Entries whose head-to-head expected score is within this of 1/2 may be
            declared tied.
        floor: Games every entry plays before the evaluation can be certified.
    """

    top_k: int = 10
    confidence: float = 0.95
    tie_margin: float = 0.03
    floor: int = 20

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.floor < 0:
            raise ValueError("top_k must be at least 1 and floor at least 0")
        if not 0.0 < self.confidence < 1.0 or not 0.0 < self.tie_margin < 0.5:
            raise ValueError("confidence must be in (0, 1) and tie_margin in (0, 0.5)")


class PairStatus(str, Enum):
    """A tested pair's state (module doc)."""

    SEPARATED = "separated"
    TIED = "tied"
    REVERSED = "reversed"
    OPEN = "open"


@dataclass(frozen=True)
class EntryStanding:
    """One entry on the final board (``rank`` 1 is best; ``mu``/``sigma`` TrueSkill)."""

    entry: Hashable
    rank: int
    rank_lo: int
    rank_hi: int
    mu: float
    sigma: float
    games: int
    wins: int
    draws: int
    losses: int


@dataclass(frozen=True)
class PairCertificate:
    """A tested pair: ``upper`` is ranked above ``lower``.

    Attributes:
        kind: ``"adjacent"`` (ranks r, r + 1 for r <= K) or ``"challenger"``.
        games: Their head-to-head games; ``units`` of them paired by seat are used.
        score: ``upper``'s mean score over the units (``nan`` without any).
        low: Lower bound on ``upper``'s expected score ``p`` against ``lower``.
        high: Upper bound on it.
        confidence: The level at which ``status`` holds (for ``open``: at which they
            would be separated); 0 when none.
    """

    upper: Hashable
    lower: Hashable
    kind: str
    status: PairStatus
    games: int
    units: int
    score: float
    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class Certificate:
    """The state of a final evaluation (module doc)."""

    standings: tuple[EntryStanding, ...]
    pairs: tuple[PairCertificate, ...]
    floor_met: bool
    certified: bool
    family_pairs: int
    config: CertificationConfig

    def open_pairs(self) -> list[PairCertificate]:
        """The tested pairs still to play for (open or reversed)."""
        return [p for p in self.pairs if p.status in (PairStatus.OPEN, PairStatus.REVERSED)]

    def to_json(self) -> dict:
        """Plain JSON-ready values (what the service publishes and the verifier compares)."""
        out = asdict(self)
        for p in out["pairs"]:
            p["status"] = p["status"].value
            p["score"] = None if math.isnan(p["score"]) else p["score"]
        return out


class FinalEvaluation:
    """A final evaluation's games so far, folded in log order; :meth:`certificate` reads it.

    :func:`certify` builds one from scratch; a driver that adds each batch with
    :meth:`add` gets the same certificate without re-rating the log every time.
    """

    def __init__(self, entries: Sequence[Hashable], config: CertificationConfig = CertificationConfig(),
                 env: RatingEnv = FINAL_RATING_ENV) -> None:
        if len(set(entries)) != len(entries):
            raise ValueError("entries must be distinct")
        self.entries = tuple(entries)
        self.config = config
        self.book = RatingBook(env)
        self._index = {e: i for i, e in enumerate(self.entries)}
        # (i, j) with i < j -> [scores of i seated first, scores of i seated second]
        self._h2h: dict[tuple[int, int], tuple[list[float], list[float]]] = {}

    def add(self, games: Iterable[Game]) -> None:
        """Fold ``games`` (in match-log order) into the ratings and the head-to-head records."""
        results = []
        for g in games:
            i, j = self._index.get(g.first), self._index.get(g.second)
            if i is None or j is None:
                raise ValueError(f"game {g} involves an entry outside the frozen pool")
            key, seat, score = ((i, j), 0, g.score) if i < j else ((j, i), 1, 1.0 - g.score)
            self._h2h.setdefault(key, ([], []))[seat].append(score)
            winner = None if g.score == 0.5 else (0 if g.score == 1.0 else 1)
            results.append(MatchResult((g.first, g.second), (ROLE, ROLE), winner))
        self.book.apply_batch(results)

    def games_between(self, a: Hashable, b: Hashable) -> int:
        """Head-to-head games of ``a`` and ``b``."""
        i, j = sorted((self._index[a], self._index[b]))
        first, second = self._h2h.get((i, j), ([], []))
        return len(first) + len(second)

    def units(self, upper: Hashable, lower: Hashable) -> np.ndarray:
        """``upper``'s mean score in each seat-balanced unit against ``lower`` (module doc)."""
        i, j = self._index[upper], self._index[lower]
        first, second = self._h2h.get((min(i, j), max(i, j)), ([], []))
        k = min(len(first), len(second))
        x = (np.asarray(first[:k], dtype=np.float64) + np.asarray(second[:k], dtype=np.float64)) / 2.0
        return x if i < j else 1.0 - x

    def certificate(self) -> Certificate:
        """The standings and the tested pairs' statuses now (module doc)."""
        standings = self._standings()
        n = len(standings)
        family = max(1, n * (n - 1) // 2)
        log_threshold = math.log(2 * family / (1.0 - self.config.confidence))
        pairs = tuple(self._pair(standings[u].entry, standings[v].entry, kind, family, log_threshold)
                      for u, v, kind in _tested(standings, self.config.top_k))
        floor_met = n < 2 or all(s.games >= self.config.floor for s in standings)  # one entry: nobody to play
        certified = floor_met and all(p.status in (PairStatus.SEPARATED, PairStatus.TIED) for p in pairs)
        return Certificate(standings, pairs, floor_met, certified, family, self.config)

    def _standings(self) -> tuple[EntryStanding, ...]:
        rows = [(self.book.standings.get((e, ROLE)), self.book.rating((e, ROLE))) for e in self.entries]
        mu = np.array([r.mu for _, r in rows])
        sigma = np.array([r.sigma for _, r in rows])
        order = np.lexsort((np.arange(len(rows)), -mu))  # mu descending, then pool order
        ranks = np.empty(len(rows), dtype=np.int64)
        ranks[order] = np.arange(1, len(rows) + 1)
        lo, hi = rank_ranges(*interval_bounds(mu, sigma), ranks) if len(rows) else (ranks, ranks)
        out = []
        for i in order.tolist():
            st = rows[i][0]
            wdl = (st.games, st.wins, st.draws, st.losses) if st is not None else (0, 0, 0, 0)
            out.append(EntryStanding(self.entries[i], int(ranks[i]), int(lo[i]), int(hi[i]),
                                     float(mu[i]), float(sigma[i]), *wdl))
        return tuple(out)

    def _pair(self, upper: Hashable, lower: Hashable, kind: str, family: int,
              log_threshold: float) -> PairCertificate:
        x = self.units(upper, lower)
        margin = self.config.tie_margin
        up, down = confidence.bets(x, margin, log_threshold)
        wealth = {  # max log wealth of each claim: p > 1/2, p < 1/2, p > 1/2 - margin, p < 1/2 + margin
            "above": confidence.log_wealth(x, up, 0.5, +1), "below": confidence.log_wealth(x, down, 0.5, -1),
            "tie_low": confidence.log_wealth(x, up, 0.5 - margin, +1),
            "tie_high": confidence.log_wealth(x, down, 0.5 + margin, -1)}
        low, high = confidence.bounds(x, up, down, log_threshold)
        if wealth["above"] >= log_threshold:
            status, w = PairStatus.SEPARATED, wealth["above"]
        elif min(wealth["tie_low"], wealth["tie_high"]) >= log_threshold:
            status, w = PairStatus.TIED, min(wealth["tie_low"], wealth["tie_high"])
        elif wealth["below"] >= log_threshold:
            status, w = PairStatus.REVERSED, wealth["below"]
        else:
            status, w = PairStatus.OPEN, wealth["above"]
        level = max(0.0, 1.0 - 2 * family * math.exp(-w))
        return PairCertificate(upper, lower, kind, status, self.games_between(upper, lower), int(x.size),
                               float(x.mean()) if x.size else math.nan, low, high, level)


def _tested(standings: Sequence[EntryStanding], top_k: int) -> list[tuple[int, int, str]]:
    """Positions ``(upper, lower, kind)`` in ``standings`` of the pairs the rule tests (module doc)."""
    n = len(standings)
    pairs = [(r, r + 1, "adjacent") for r in range(min(top_k, n - 1))]
    if n > top_k + 1:
        pairs += [(top_k - 1, c, "challenger") for c in range(top_k + 1, n) if standings[c].rank_lo <= top_k]
    return pairs


def certify(entries: Sequence[Hashable], games: Iterable[Game], config: CertificationConfig = CertificationConfig(),
            env: RatingEnv = FINAL_RATING_ENV) -> Certificate:
    """The certificate of a final evaluation from its pool and its games in log order (module doc).

    Args:
        entries: The frozen pool (its order breaks rating ties).
        games: Every game of the final evaluation, in match-log order.
        config: K, confidence, tie margin, floor.
        env: TrueSkill constants (the prior the ratings restart from).
    """
    evaluation = FinalEvaluation(entries, config, env)
    evaluation.add(games)
    return evaluation.certificate()
