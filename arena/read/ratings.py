"""A rating as users see it, and how far it is from settled (shared by every read model)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Self

from pydantic import BaseModel, Field

from arena.core.agent_status import AgentStatus
from arena.storage.db import repositories as repo
from league.ratings.book import DEFAULT_TARGET_SIGMA
from league.ratings.rating import Rating, RatingEnv
from league.scheduling.matchmaking import expected_matches_to_sigma


class RatingRecord(BaseModel):
    """A TrueSkill rating and the rated results behind it: the columns of every board's row."""

    mu: float
    sigma: float
    conservative: float = Field(description="mu - 3 sigma: what boards rank by.")
    games: int
    wins: int
    draws: int
    losses: int


@functools.lru_cache(maxsize=65536)
def _matches_to_settle(sigma: float, env: RatingEnv) -> float:
    # Between equal means the update depends on sigma only, so mu is irrelevant here.
    return expected_matches_to_sigma(Rating(env.mu, sigma), DEFAULT_TARGET_SIGMA, env=env)


def matches_to_settle(status: str, sigmas: Sequence[float], env: RatingEnv) -> int | None:
    """Expected rated matches until every role's sigma reaches the placement target.

    Args:
        status: The agent's status (rejected and retired agents play no more: ``None``).
        sigmas: The agent's sigma in each rated role (empty: not rated yet, the prior).
        env: The TrueSkill constants of the agent's ladder.

    Returns:
        ``0`` when settled, ``None`` when it will not settle.
    """
    if AgentStatus(status).finished:
        return None
    worst = max((_matches_to_settle(round(s, 9), env) for s in sigmas or [env.sigma]), default=0.0)
    return None if math.isinf(worst) else math.ceil(worst)


class RatingStats(RatingRecord):
    """A TrueSkill rating as users see it: mean, uncertainty, rated W/D/L, 95% interval, how far from settled."""

    ci_low: float = Field(description="mu - 1.96 sigma (95% interval).")
    ci_high: float = Field(description="mu + 1.96 sigma (95% interval).")
    expected_matches_to_settle: int | None = Field(
        description="Expected rated matches until sigma reaches the placement target; 0 when "
        "settled, null for rejected/retired agents.")

    @classmethod
    def of(cls, r: repo.StoredRating, agent_status: str, rating_env: RatingEnv, **fields: Any) -> Self:
        """The stats of a stored rating (``fields`` fill the subclass's own fields)."""
        low, high = Rating(r.mu, r.sigma).interval95
        return cls(mu=r.mu, sigma=r.sigma, conservative=r.conservative, ci_low=low, ci_high=high,
                   games=r.games, wins=r.wins, draws=r.draws, losses=r.losses,
                   expected_matches_to_settle=matches_to_settle(agent_status, [r.sigma], rating_env), **fields)
