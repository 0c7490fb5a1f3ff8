"""Who plays whom: match quality for ladders, PFSP weights for leagues. Pure functions.

Ladder (rating many submitted agents): TrueSkill match quality between agents, pair
weights tilted toward uncertain agents, a batch's pairs (placement first), and how many
matches a rating needs to settle.

League (training a learner against a pool): AlphaStar's prioritized fictitious
self-play (PFSP) weights over decayed win rates (:class:`WinRateTable`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from league.ratings.closed_form import rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv

# ---------------------------------------------------------------- ladder


def quality_matrix(ratings: Sequence[Rating], *, env: RatingEnv) -> np.ndarray:
    """TrueSkill 1v1 match quality of every pair, with zeros on the diagonal.

    Quality is the draw probability of the pair relative to two identical players:
    ``sqrt(2b^2 / s) * exp(-(mu_i - mu_j)^2 / (2 s))`` with ``s = 2b^2 + var_i + var_j``,
    the closed form of ``trueskill.quality_1vs1`` (which builds matrices per pair).

    Args:
        ratings: Ratings of the agents.
        env: The ladder's rating environment (for beta).

    Returns:
        A symmetric ``(n, n)`` array; an agent never plays itself, so ``q[i, i] == 0``.
    """
    mu = np.array([r.mu for r in ratings], dtype=float)
    var = np.array([r.sigma for r in ratings], dtype=float) ** 2
    two_beta_sq = 2.0 * env.beta * env.beta
    # Parenthesized so that q[i, j] == q[j, i] exactly (float addition is commutative).
    spread = two_beta_sq + (var[:, None] + var[None, :])
    gap = mu[:, None] - mu[None, :]
    quality = np.sqrt(two_beta_sq / spread) * np.exp(-(gap * gap) / (2.0 * spread))
    np.fill_diagonal(quality, 0.0)
    return quality


def ladder_pair_weights(ratings: Sequence[Rating], *, env: RatingEnv) -> np.ndarray:
    """Unnormalized sampling weight of each pair ``i < j`` after placement.

    ``quality * (sigma_i + sigma_j)``: fair matches are preferred (they teach the
    ratings the most), and uncertain agents get more games so their sigma shrinks.

    Returns:
        An ``(n, n)`` array, non-zero only strictly above the diagonal.
    """
    sigma = np.array([r.sigma for r in ratings], dtype=float)
    weights = quality_matrix(ratings, env=env) * (sigma[:, None] + sigma[None, :])
    return np.triu(weights, k=1)


def sample_ladder_pairs(
    ratings: Sequence[Rating],
    n: int,
    rng: np.random.Generator,
    *,
    env: RatingEnv,
    target_sigma: float,
    placement_share: float = 0.5,
    top_k: int = 3,
) -> list[tuple[int, int]]:
    """``n`` pairings for the next batch of ladder matches.

    Agents whose sigma is above ``target_sigma`` are in placement: they get a share of
    the batch, each match against one of their ``top_k`` opponents of highest match
    quality. The rest of the batch is drawn by :func:`ladder_pair_weights` (quality,
    favouring uncertain agents). Pair order is randomised so seats stay balanced.
    """
    m = len(ratings)
    if m < 2:
        raise ValueError("a ladder needs at least two agents")
    sigma = np.array([r.sigma for r in ratings])
    placing = np.flatnonzero(sigma > target_sigma)
    pairs: list[tuple[int, int]] = []
    if placing.size:
        share = n if placing.size == m else round(n * placement_share)
        quality = quality_matrix(ratings, env=env)
        np.fill_diagonal(quality, -1.0)
        best = np.argsort(-quality, axis=1)[:, : min(top_k, m - 1)]
        who = placing[rng.integers(placing.size, size=share)]
        opp = best[who, rng.integers(best.shape[1], size=share)]
        pairs.extend(zip(who.tolist(), opp.tolist()))
    rest = n - len(pairs)
    if rest > 0:
        weights = ladder_pair_weights(ratings, env=env).ravel()
        flat = rng.choice(weights.size, size=rest, p=weights / weights.sum())
        pairs.extend((int(f // m), int(f % m)) for f in flat)
    swap = rng.random(len(pairs)) < 0.5
    return [(j, i) if s else (i, j) for (i, j), s in zip(pairs, swap)]


def expected_matches_to_sigma(
    rating: Rating,
    target_sigma: float,
    *,
    env: RatingEnv,
    opponent_sigma: float | None = None,
    max_matches: int = 10_000,
) -> float:
    """Expected number of matches until ``rating.sigma`` falls below ``target_sigma``.

    Model (mean field): every match is against an evenly matched opponent (same mu),
    by default a fellow newcomer whose sigma shrinks in lockstep, or one of fixed
    ``opponent_sigma``. Between equal means sigma's update depends on the outcome only
    through win-vs-draw, so each step applies the *expected* variance update: a draw
    with probability ``env.draw_probability``, a decisive result otherwise (winning and
    losing shrink sigma equally). The dynamics noise ``tau`` puts a floor under sigma.

    Args:
        rating: The agent's current rating.
        target_sigma: The sigma to reach (e.g. the ladder's placement target).
        env: The ladder's rating environment.
        opponent_sigma: Fixed sigma of the opponents; None for a lockstep newcomer.
        max_matches: Give up (return ``inf``) after this many simulated matches.

    Returns:
        The number of matches (0 if already below target), or ``math.inf`` if sigma
        cannot get below ``target_sigma`` (below the tau floor).
    """
    mu, sigma, p_draw = rating.mu, rating.sigma, env.draw_probability
    for matches in range(max_matches + 1):
        if sigma < target_sigma:
            return float(matches)
        opponent = Rating(mu, sigma if opponent_sigma is None else opponent_sigma)
        decisive, _ = rate_1v1_fast(Rating(mu, sigma), opponent, env=env)
        drawn, _ = rate_1v1_fast(Rating(mu, sigma), opponent, drawn=True, env=env)
        new_sigma = math.sqrt((1 - p_draw) * decisive.sigma**2 + p_draw * drawn.sigma**2)
        if sigma - new_sigma < 1e-12:  # converged to the tau floor above the target
            return math.inf
        sigma = new_sigma
    return math.inf


# ---------------------------------------------------------------- league

PFSPWeighting = Literal["squared", "variance", "linear_capped"]


def pfsp_weights(win_rates: Sequence[float], weighting: PFSPWeighting = "squared") -> np.ndarray:
    """AlphaStar's PFSP opponent probabilities from the learner's win rates.

    ``squared`` (1-x)^2 focuses on opponents the learner loses to; ``variance``
    x(1-x) on opponents near its level; ``linear_capped`` min(0.5, 1-x) on everything
    it does not beat reliably, without letting one nemesis take every game.

    Args:
        win_rates: Learner's win rate ``x`` against each opponent, in [0, 1].
        weighting: Which PFSP weighting function to apply.

    Returns:
        Probabilities summing to 1; uniform if every weight is 0 (all beaten).
    """
    x = np.asarray(win_rates, dtype=float)
    if x.size == 0:
        raise ValueError("PFSP needs at least one opponent")
    if weighting == "squared":
        weights = (1.0 - x) ** 2
    elif weighting == "variance":
        weights = x * (1.0 - x)
    elif weighting == "linear_capped":
        weights = np.minimum(0.5, 1.0 - x)
    else:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; use one of {PFSPWeighting}")
    total = weights.sum()
    return weights / total if total > 0 else np.full(x.size, 1.0 / x.size)


class WinRateTable:
    """The learner's win rate against each opponent, from exponentially decayed counts.

    Each result against opponent ``j`` first multiplies ``j``'s counts by ``decay``,
    so old games (played by an older learner) fade out. A prior of ``prior_games``
    half-won games makes unseen opponents read 0.5 and keeps early rates moderate.
    Decay is per opponent, so a rarely played opponent keeps its (old) evidence.
    """

    def __init__(self, decay: float = 0.99, prior_games: float = 1.0) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.decay = decay
        self.prior_games = prior_games
        self._wins: dict[Hashable, float] = {}
        self._games: dict[Hashable, float] = {}

    def record(self, opponent: Hashable, score: float) -> None:
        """Adds one result: ``score`` is 1 for a learner win, 0.5 a draw, 0 a loss."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {score}")
        self._wins[opponent] = self.decay * self._wins.get(opponent, 0.0) + score
        self._games[opponent] = self.decay * self._games.get(opponent, 0.0) + 1.0

    def record_many(self, opponent: Hashable, games: int, score: float) -> None:
        """Adds ``games`` results worth ``score`` in all (wins + draws / 2) at once.

        The same as recording them one by one with the wins, draws and losses spread
        evenly (each game decays the earlier ones): a batch reported by a trainer after
        many games, in the order it does not know.
        """
        if games < 0 or not 0.0 <= score <= games:
            raise ValueError(f"need 0 <= score <= games, got score {score} over {games} games")
        if games == 0:
            return
        kept = self.decay ** games
        added = games if self.decay == 1.0 else (1.0 - kept) / (1.0 - self.decay)
        self._wins[opponent] = kept * self._wins.get(opponent, 0.0) + score / games * added
        self._games[opponent] = kept * self._games.get(opponent, 0.0) + added

    def games(self, opponent: Hashable) -> float:
        """Decayed number of games against ``opponent``."""
        return self._games.get(opponent, 0.0)

    def win_rate(self, opponent: Hashable) -> float:
        """Smoothed decayed win rate against ``opponent`` (0.5 if never played)."""
        wins = self._wins.get(opponent, 0.0) + 0.5 * self.prior_games
        return wins / (self.games(opponent) + self.prior_games)

    def win_rates(self, opponents: Sequence[Hashable]) -> np.ndarray:
        """:meth:`win_rate` of each opponent, as an array for :func:`sample_pfsp`."""
        return np.array([self.win_rate(o) for o in opponents], dtype=float)

    def opponents(self) -> list[Hashable]:
        """Every opponent with at least one recorded result, in first-seen order."""
        return list(self._games)

    def to_json(self) -> dict:
        """JSON-ready state (opponent ids must be strings)."""
        return {
            "decay": self.decay,
            "prior_games": self.prior_games,
            "wins": {str(k): v for k, v in self._wins.items()},
            "games": {str(k): v for k, v in self._games.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> WinRateTable:
        """Inverse of :meth:`to_json`."""
        table = cls(float(data["decay"]), float(data["prior_games"]))
        table._wins = {k: float(v) for k, v in data["wins"].items()}
        table._games = {k: float(v) for k, v in data["games"].items()}
        return table

