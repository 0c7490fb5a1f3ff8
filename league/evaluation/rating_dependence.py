"""Rating dependence: agents whose rating rests on one opponent's games. Pure.

Part of the integrity checks (:mod:`league.evaluation.integrity` has the pair test and the
overview).

:func:`rating_dependence` replays each agent's rating over
its rated matches in order - the ladder's own 1v1 TrueSkill update, with each
opponent's rating as it was at the time - once with every match and once leaving out
each opponent in turn (vectorised over the variants). If leaving out one opponent
moves the agent's mu by more than ``z`` of its standard deviations (and at least
``min_shift``), the rating rests on that opponent: ``up`` for an agent fed wins,
``down`` for one that loses them. The default ``z = 2.5`` was set on engine-played
connect four boards (``tests/league/evaluation/test_integrity.py``'s planted pair, five seeds): the
throwing pair's shifts were 2.9-4.1 sigmas, every honest agent's at most 1.6.

The same replays give :func:`league.evaluation.integrity.suspicious_pairs` each pair's ratings
without its own games. :func:`rated_matches` rates plain games from the prior the way
a fresh ladder would (for replays of a log without rating events, and for tests).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from league.evaluation.headtohead import Game
from league.ratings.closed_form import rate_1v1_arrays, rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv

__all__ = ["DependenceFlag", "LeaveOneOut", "RatedMatch", "leave_one_out_ratings", "rated_matches",
           "rating_dependence"]


@dataclass(frozen=True)
class RatedMatch:
    """One rated 1v1 match with both ratings before it (from the ladder's rating events).

    Attributes:
        a: One agent.
        b: The other.
        score: ``a``'s score: 1 win, 0.5 draw, 0 loss.
        a_before: ``a``'s rating before the match.
        b_before: ``b``'s rating before the match.
    """

    a: Hashable
    b: Hashable
    score: float
    a_before: Rating
    b_before: Rating


@dataclass(frozen=True)
class DependenceFlag:
    """An agent whose rating moves by one opponent's games alone.

    Attributes:
        agent: The flagged agent.
        opponent: The opponent its rating rests on.
        direction: ``"up"`` (those games raised it) or ``"down"`` (they lowered it).
        mu: The agent's mu replayed over all its matches.
        sigma: Its sigma.
        mu_without: Its mu replayed without the matches against ``opponent``.
        sigma_without: The sigma of that replay.
        shift: ``mu - mu_without``.
        games: Its matches in all.
        games_vs_opponent: Its matches against ``opponent``.
        wins: Its wins in all.
        wins_vs_opponent: Its wins against ``opponent``.
    """

    agent: Hashable
    opponent: Hashable
    direction: str
    mu: float
    sigma: float
    mu_without: float
    sigma_without: float
    shift: float
    games: int
    games_vs_opponent: int
    wins: int
    wins_vs_opponent: int


@dataclass(frozen=True)
class LeaveOneOut:
    """One agent's rating replayed over its matches, and once without each opponent's.

    Attributes:
        opponents: Its distinct opponents, in order of first meeting.
        mu: ``mu[0]`` over all matches, ``mu[k + 1]`` without ``opponents[k]``'s.
        sigma: The matching sigmas.
        games: ``(opponent, score)`` of each of its matches, in order.
    """

    opponents: list[Hashable]
    mu: np.ndarray
    sigma: np.ndarray
    games: list[tuple[Hashable, float]]

    def without(self, opponent: Hashable) -> Rating:
        """The rating replayed without ``opponent``'s matches."""
        k = self.opponents.index(opponent) + 1
        return Rating(float(self.mu[k]), float(self.sigma[k]))


def leave_one_out_ratings(matches: Iterable[RatedMatch], *, env: RatingEnv | None = None) -> dict[
        Hashable, LeaveOneOut]:
    """Every agent's rating replayed with all its matches and without each opponent's.

    The replay is the ladder's own 1v1 TrueSkill update, in match order, each opponent
    at the rating it had then; all variants of one agent advance together.
    """
    env = env or RatingEnv()
    history: dict[Hashable, list[tuple[Hashable, float, Rating]]] = {}
    for m in matches:
        history.setdefault(m.a, []).append((m.b, m.score, m.b_before))
        history.setdefault(m.b, []).append((m.a, 1.0 - m.score, m.a_before))
    out = {}
    for agent, own in history.items():
        opponents = list(dict.fromkeys(o for o, _, _ in own))
        index = {o: k + 1 for k, o in enumerate(opponents)}
        mu, sigma = np.full(len(opponents) + 1, env.mu), np.full(len(opponents) + 1, env.sigma)
        for opponent, score, opp in own:
            live = np.ones(mu.size, dtype=bool)
            live[index[opponent]] = False
            om, os_ = np.full(live.sum(), opp.mu), np.full(live.sum(), opp.sigma)
            if score >= 0.5:  # a win, or a draw with the agent listed first
                mu[live], sigma[live], _, _ = rate_1v1_arrays(mu[live], sigma[live], om, os_, score == 0.5,
                                                              env=env)
            else:
                _, _, mu[live], sigma[live] = rate_1v1_arrays(om, os_, mu[live], sigma[live], False, env=env)
        out[agent] = LeaveOneOut(opponents, mu, sigma, [(o, s) for o, s, _ in own])
    return out


def rating_dependence(matches: Iterable[RatedMatch], *, env: RatingEnv | None = None, z: float = 2.5,
                      min_shift: float = 1.0, min_opponents: int = 2) -> list[DependenceFlag]:
    """Agents whose rating moves by more than ``z`` sigmas on one opponent's matches.

    Args:
        matches: Rated 1v1 matches of one ladder (env and role), in the order they were rated.
        env: The ladder's rating environment; the default ladder's if None.
        z: Flag when ``|mu - mu_without| > z * sigma_without``.
        min_shift: ... and at least this many mu points.
        min_opponents: Agents with fewer distinct opponents are not examined (with one
            opponent, every rating rests on it).

    Returns:
        Flags, largest shift (in sigmas) first.
    """
    flags = []
    for agent, replay in leave_one_out_ratings(matches, env=env).items():
        if len(replay.opponents) < min_opponents:
            continue
        mu, sigma = replay.mu, replay.sigma
        shift = mu[0] - mu[1:]
        for k in np.flatnonzero((np.abs(shift) > z * sigma[1:]) & (np.abs(shift) >= min_shift)):
            opp = replay.opponents[k]
            flags.append(DependenceFlag(
                agent=agent, opponent=opp, direction="up" if shift[k] > 0 else "down",
                mu=float(mu[0]), sigma=float(sigma[0]), mu_without=float(mu[k + 1]),
                sigma_without=float(sigma[k + 1]), shift=float(shift[k]), games=len(replay.games),
                games_vs_opponent=sum(o == opp for o, _ in replay.games),
                wins=sum(s == 1.0 for _, s in replay.games),
                wins_vs_opponent=sum(o == opp and s == 1.0 for o, s in replay.games)))
    return sorted(flags, key=lambda f: -abs(f.shift) / f.sigma_without)


def rated_matches(games: Iterable[Game], *, env: RatingEnv | None = None) -> tuple[list[RatedMatch], dict]:
    """Rate ``games`` in order from the prior, as a fresh ladder would (for replays and tests).

    Returns:
        Each game as a :class:`RatedMatch` (ratings before it) and the final ratings.
    """
    env = env or RatingEnv()
    ratings: dict[Hashable, Rating] = {}
    out = []
    for g in games:
        a, b = ratings.get(g.first, env.new_rating()), ratings.get(g.second, env.new_rating())
        out.append(RatedMatch(g.first, g.second, g.score, a, b))
        if g.score == 0.0:
            new_b, new_a = rate_1v1_fast(b, a, env=env)
        else:
            new_a, new_b = rate_1v1_fast(a, b, g.score == 0.5, env=env)
        ratings[g.first], ratings[g.second] = new_a, new_b
    return out, ratings
