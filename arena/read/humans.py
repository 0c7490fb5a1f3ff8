"""The humans board of an env: people rated against the agents they played.

People's matches are stored unrated, so nobody can move an agent's rating by choosing
to lose to it. A signed-in person is still rated, on a board of their own: each of
their matches updates *only the person's* TrueSkill rating, against the agent's
rating at the time of the match held fixed (the agent's latest rating before the
match's ``seq``, from the rating events; the prior where it had none), with the
env's ladder constants (:func:`~arena.ladder.registration.ladder_rating_env`).

The board is derived on every read from the match log, like every rating here, so it
can always be rebuilt: the same log gives the same board. Guests (human agents
without an owner) are not on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from arena.ladder.registration import ladder_rating_env
from arena.storage.db import repositories as repo
from arena.storage.db.repositories.humans import HumanMatch, human_matches
from league.ratings.closed_form import rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv
from league.results import Record


@dataclass
class PersonLine(Record):
    """One person's line while the board is built."""

    user_id: int
    agent_id: int
    rating: Rating
    last_match_at: datetime | None = None


def rate_person(person: Rating, match: HumanMatch, env: RatingEnv) -> Rating:
    """The person's rating after ``match``; the agent's rating (then) is held fixed."""
    agent = env.new_rating() if match.agent_mu is None else Rating(match.agent_mu, match.agent_sigma)
    if match.result == "W":
        return rate_1v1_fast(person, agent, env=env)[0]
    if match.result == "L":
        return rate_1v1_fast(agent, person, env=env)[1]
    return rate_1v1_fast(person, agent, drawn=True, env=env)[0]


def person_lines(matches: list[HumanMatch], env: RatingEnv) -> list[PersonLine]:
    """Every person's rating and record after ``matches`` (in log order)."""
    lines: dict[int, PersonLine] = {}
    for match in matches:
        line = lines.get(match.human_agent_id)
        if line is None:
            line = lines[match.human_agent_id] = PersonLine(match.owner_id, match.human_agent_id, env.new_rating())
        line.rating = rate_person(line.rating, match, env)
        line.games += 1
        line.wins += match.result == "W"
        line.draws += match.result == "D"
        line.losses += match.result == "L"
        line.last_match_at = match.created_at
    return list(lines.values())


def humans_board(session: Session, env_id: str, limit: int = 100) -> dict[str, Any]:
    """The humans board of ``env_id``, best first (by ``mu - 3 sigma``), as
    ``GET /api/v1/envs/{env}/humans`` returns it: ``{"env", "count", "data": [row]}``."""
    env = ladder_rating_env(session, env_id)
    lines = sorted(person_lines(human_matches(session, env_id), env),
                   key=lambda line: (-line.rating.conservative, line.agent_id))
    names = repo.user_names(session, [line.user_id for line in lines[:limit]])
    rows = []
    for rank, line in enumerate(lines[:limit], 1):
        low, high = line.rating.interval95
        rows.append({
            "rank": rank, "user_id": line.user_id, "name": names.get(line.user_id, f"user {line.user_id}"),
            "agent_id": line.agent_id, "mu": line.rating.mu, "sigma": line.rating.sigma,
            "conservative": line.rating.conservative, "ci_low": low, "ci_high": high, "games": line.games,
            "wins": line.wins, "draws": line.draws, "losses": line.losses,
            "last_match_at": line.last_match_at.isoformat() if line.last_match_at else None,
        })
    return {"env": env_id, "count": len(lines), "data": rows}
