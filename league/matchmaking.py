"""Who plays whom: ladder matchmaking and league opponent sampling. Pure functions.

Ladder (rating many submitted agents): new agents go through *placement* (each plays
the opponent it is most likely to draw with, which is the most informative match),
then pairs are sampled in proportion to match quality, tilted toward uncertain agents.

League (training a learner against a pool): AlphaStar's prioritized fictitious
self-play (PFSP) over decayed win rates, OpenAI Five's 80% latest / 20% past self-play,
uniform and round-robin.

All randomness comes from the ``rng`` (a ``numpy.random.Generator``) passed in.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

import numpy as np

from league.ratings import Rating, RatingEnv
from league.ratings_fast import rate_1v1_fast

K = TypeVar("K", bound=Hashable)

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


def match_quality(a: Rating, b: Rating, *, env: RatingEnv) -> float:
    """TrueSkill match quality of a 1v1 (1.0 for identical, certain ratings)."""
    return float(quality_matrix([a, b], env=env)[0, 1])


def placement_opponent(index: int, ratings: Sequence[Rating], *, env: RatingEnv) -> int:
    """The opponent of highest match quality for agent ``index`` (lowest index on ties)."""
    if len(ratings) < 2:
        raise ValueError("placement needs at least one other agent on the ladder")
    return int(np.argmax(quality_matrix(ratings, env=env)[index]))


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


def next_ladder_pair(
    ratings: Sequence[Rating], rng: np.random.Generator, *, env: RatingEnv, target_sigma: float
) -> tuple[int, int]:
    """Picks the next ladder match.

    While some agent's sigma is above ``target_sigma``, the most uncertain one is in
    placement and plays its highest-quality opponent (deterministic). Otherwise a pair
    is drawn with probability proportional to :func:`ladder_pair_weights`.

    Args:
        ratings: Ratings of the agents on the ladder (at least two).
        rng: Source of randomness.
        env: The ladder's rating environment.
        target_sigma: Sigma below which an agent counts as placed.

    Returns:
        Indices ``(i, j)`` of the two agents to play; in placement ``i`` is the new agent.
    """
    if len(ratings) < 2:
        raise ValueError("a ladder match needs at least two agents")
    sigma = np.array([r.sigma for r in ratings], dtype=float)
    if sigma.max() > target_sigma:
        newcomer = int(np.argmax(sigma))
        return newcomer, placement_opponent(newcomer, ratings, env=env)
    weights = ladder_pair_weights(ratings, env=env).ravel()
    flat = int(rng.choice(weights.size, p=weights / weights.sum()))
    i, j = divmod(flat, len(ratings))
    return i, j


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


def sample_pfsp(
    opponents: Sequence[K],
    win_rates: Sequence[float],
    rng: np.random.Generator,
    weighting: PFSPWeighting = "squared",
) -> K:
    """Draws one opponent by PFSP (see :func:`pfsp_weights`)."""
    if len(opponents) != len(win_rates):
        raise ValueError("give one win rate per opponent")
    return opponents[int(rng.choice(len(opponents), p=pfsp_weights(win_rates, weighting)))]


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


def sample_latest_or_past(
    latest: K,
    past: Sequence[K],
    quality_scores: Sequence[float],
    rng: np.random.Generator,
    latest_prob: float = 0.8,
) -> K:
    """OpenAI Five self-play: the latest policy 80% of the time, else a past one.

    Past opponents are drawn with probability ``softmax(quality_scores)``, as in
    OpenAI Five; see :func:`lower_quality_after_win` for how scores evolve.

    Args:
        latest: The current policy (plays itself).
        past: Earlier snapshots.
        quality_scores: One real score per past snapshot (0 for all = uniform).
        rng: Source of randomness.
        latest_prob: Probability of picking ``latest``.

    Returns:
        The chosen opponent (``latest`` whenever ``past`` is empty).
    """
    if len(past) != len(quality_scores):
        raise ValueError("give one quality score per past snapshot")
    if not past or rng.random() < latest_prob:
        return latest
    scores = np.asarray(quality_scores, dtype=float)
    probs = np.exp(scores - scores.max())  # shift: same softmax, no overflow
    return past[int(rng.choice(len(past), p=probs / probs.sum()))]


def lower_quality_after_win(
    quality_scores: Sequence[float], beaten: int, learning_rate: float = 0.01
) -> np.ndarray:
    """OpenAI Five's update: a past snapshot the learner beat loses quality.

    ``q[beaten] -= lr / (N * p[beaten])`` with ``p = softmax(q)``; dividing by ``p``
    keeps the update unbiased although likely snapshots are sampled more often.

    Returns:
        The new scores (the input is not modified).
    """
    scores = np.array(quality_scores, dtype=float)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    scores[beaten] -= learning_rate / (scores.size * probs[beaten])
    return scores


def sample_uniform(opponents: Sequence[K], rng: np.random.Generator) -> K:
    """Draws one opponent uniformly (fictitious self-play over the whole pool)."""
    if not opponents:
        raise ValueError("no opponents to sample from")
    return opponents[int(rng.integers(len(opponents)))]


def round_robin_schedule(n: int) -> list[list[tuple[int, int]]]:
    """All pairs of ``n`` agents, grouped in rounds where everyone plays at most once.

    Circle method: agent 0 stays put while the others rotate, so ``n - 1`` rounds
    (``n`` for odd ``n``, one agent sitting out per round) cover every pair once.
    """
    players = list(range(n)) + ([None] if n % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        half = len(players) // 2
        pairs = zip(players[:half], reversed(players[half:]))
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if None not in (a, b)])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def round_robin_pair(step: int, n: int) -> tuple[int, int]:
    """The ``step``-th match of an endless round-robin among ``n`` agents (cycles)."""
    if n < 2:
        raise ValueError("a round-robin needs at least two agents")
    pairs = [pair for round_ in round_robin_schedule(n) for pair in round_]
    return pairs[step % len(pairs)]
