"""TrueSkill ratings behind our own small API.

Every ladder (one per env id) owns one :class:`RatingEnv`, which wraps an explicit
``trueskill.TrueSkill`` object; the package's global ``setup()`` is never used, so two
ladders with different constants cannot leak into each other.

Ratings are derived data (the match log is the source of truth), so :class:`Rating`
is an immutable value and every update returns new ratings.

Numerical note: the package's default backend computes the normal cdf from a
polynomial ``erfc`` approximation and raises ``FloatingPointError`` on extreme upsets
(e.g. a mu=0 player beating a mu=300 player, both sigma 0.5). Every update here
retries such a match on a twin environment with the arbitrary-precision ``mpmath``
backend, so callers always get finite ratings.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import trueskill

logger = logging.getLogger(__name__)

MU = 25.0
SIGMA = MU / 3
DRAW_PROBABILITY = 0.10
Z95 = 1.96

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rating:
    """A skill belief: a Gaussian with mean ``mu`` and standard deviation ``sigma``."""

    mu: float
    sigma: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mu) and math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"a rating needs a finite mu and a finite sigma > 0, got {self}")

    @property
    def conservative(self) -> float:
        """Leaderboard score ``mu - 3 sigma``: the skill we are ~99.9% sure is exceeded."""
        return self.mu - 3.0 * self.sigma

    @property
    def interval95(self) -> tuple[float, float]:
        """The 95% credible interval ``mu ± 1.96 sigma`` shown to users."""
        return (self.mu - Z95 * self.sigma, self.mu + Z95 * self.sigma)


@dataclass(frozen=True)
class RatingEnv:
    """TrueSkill constants of one ladder, plus the package objects built from them.

    Attributes:
        mu: Initial mean of a new rating.
        sigma: Initial standard deviation of a new rating.
        beta: Performance noise: a ``beta`` skill gap means ~76% win chance.
            Defaults to ``sigma / 2``.
        tau: Dynamics noise added before every update so sigma never collapses to 0.
            Defaults to ``sigma / 100``.
        draw_probability: Probability that two evenly matched teams draw.
    """

    mu: float = MU
    sigma: float = SIGMA
    beta: float | None = None
    tau: float | None = None
    draw_probability: float = DRAW_PROBABILITY
    package: trueskill.TrueSkill = field(init=False, repr=False, compare=False)
    precise: trueskill.TrueSkill = field(init=False, repr=False, compare=False)
    draw_margin_1v1: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.draw_probability < 1.0:
            raise ValueError(f"draw_probability must be in [0, 1), got {self.draw_probability}")
        # Frozen dataclass: derived fields are set once here, never changed afterwards.
        setattr_ = object.__setattr__
        setattr_(self, "beta", self.sigma / 2 if self.beta is None else float(self.beta))
        setattr_(self, "tau", self.sigma / 100 if self.tau is None else float(self.tau))
        params = (self.mu, self.sigma, self.beta, self.tau, self.draw_probability)
        setattr_(self, "package", trueskill.TrueSkill(*params))
        setattr_(self, "precise", trueskill.TrueSkill(*params, backend="mpmath"))
        # Computed with the package's own ppf (not an independent, more accurate
        # inverse cdf): the package's ppf inverts its approximate erfc and differs
        # from the true quantile by ~2e-7, which would break the fast path's
        # 1e-9 agreement with trueskill.rate_1vs1.
        margin = trueskill.calc_draw_margin(self.draw_probability, 2, env=self.package)
        setattr_(self, "draw_margin_1v1", float(margin))

    def new_rating(self) -> Rating:
        """The prior rating of an agent that has not played yet."""
        return Rating(self.mu, self.sigma)

    def to_json(self) -> dict[str, float]:
        """The constants, as stored with a ladder (every one explicit, defaults resolved)."""
        return {"mu": self.mu, "sigma": self.sigma, "beta": float(self.beta),  # type: ignore[arg-type]
                "tau": float(self.tau), "draw_probability": self.draw_probability}  # type: ignore[arg-type]

    @staticmethod
    def from_json(data: Mapping[str, float]) -> RatingEnv:
        """The environment :meth:`to_json` wrote (one shared object per set of constants)."""
        return _rating_env(float(data["mu"]), float(data["sigma"]), float(data["beta"]),
                           float(data["tau"]), float(data["draw_probability"]))


@functools.lru_cache(maxsize=64)
def _rating_env(mu: float, sigma: float, beta: float, tau: float, draw: float) -> RatingEnv:
    return RatingEnv(mu, sigma, beta, tau, draw)


def _to_package(rating: Rating) -> trueskill.Rating:
    return trueskill.Rating(rating.mu, rating.sigma)


def _from_package(rating: trueskill.Rating) -> Rating:
    return Rating(float(rating.mu), float(rating.sigma))


def _with_precise_retry(update: Callable[[trueskill.TrueSkill], T], env: RatingEnv) -> T:
    """Runs ``update`` on the fast float backend, retrying on mpmath if it overflows."""
    try:
        return update(env.package)
    except FloatingPointError:
        # Extreme upsets underflow the float cdf; mpmath has the precision to finish.
        logger.debug("TrueSkill float backend overflowed; retrying with mpmath")
        return update(env.precise)


def rate_teams(
    teams: Sequence[Sequence[Rating]], ranks: Sequence[int], *, env: RatingEnv
) -> list[list[Rating]]:
    """Updates the ratings of a team match, a free-for-all, or any mix of the two.

    A 1v1 is two teams of one (what ``trueskill.rate_1vs1`` does); the ladder rates those
    with :func:`league.ratings.closed_form.rate_1v1_fast`, which falls back to this.

    Args:
        teams: Ratings of each team's members; a free-for-all is teams of one.
        ranks: Finishing rank of each team, 0 is best; equal ranks are draws.
        env: The ladder's rating environment.

    Returns:
        New ratings with the same shape as ``teams``.

    Raises:
        ValueError: Fewer than two teams, an empty team, or one rank per team missing.
    """
    if len(teams) < 2 or any(len(team) == 0 for team in teams):
        raise ValueError("a rated match needs at least two non-empty teams")
    if len(ranks) != len(teams):
        raise ValueError(f"got {len(ranks)} ranks for {len(teams)} teams; give one per team")
    groups = [tuple(_to_package(r) for r in team) for team in teams]

    def update(ts_env: trueskill.TrueSkill) -> list[list[Rating]]:
        rated = ts_env.rate(groups, ranks=list(ranks))
        return [[_from_package(r) for r in team] for team in rated]

    return _with_precise_retry(update, env)

