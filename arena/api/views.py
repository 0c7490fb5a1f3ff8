"""Read models: stored rows turned into response bodies, with no N+1 queries.

Each function takes a whole page of rows and loads what they refer to (ratings,
owner names, queue positions, agent ids of seats) in one query per kind.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from arena.db import repositories as repo
from league.ladder import DEFAULT_TARGET_SIGMA
from league.matchmaking import expected_matches_to_sigma
from league.ratings import MU, SIGMA, Rating, RatingEnv

AgentIdLookup = Callable[[Session, str, set[str]], Mapping[str, int]]

WAITING = ("queued", "validating")
NOT_PLAYING = ("rejected", "retired")
_RATING_ENV = RatingEnv()  # the ladder's constants (arena.ladder uses the defaults)


@functools.lru_cache(maxsize=4096)
def _matches_to_settle(sigma: float) -> float:
    # Between equal means the update depends on sigma only, so mu is irrelevant here.
    return expected_matches_to_sigma(Rating(MU, sigma), DEFAULT_TARGET_SIGMA, env=_RATING_ENV)


def matches_to_settle(status: str, sigmas: Sequence[float]) -> int | None:
    """Expected rated matches until every role's sigma reaches the placement target.

    Args:
        status: The agent's status (rejected and retired agents play no more: ``None``).
        sigmas: The agent's sigma in each rated role (empty: not rated yet, the prior).

    Returns:
        ``0`` when settled, ``None`` when it will not settle.
    """
    if status in NOT_PLAYING:
        return None
    worst = max((_matches_to_settle(round(s, 9)) for s in sigmas or [SIGMA]), default=0.0)
    return None if math.isinf(worst) else math.ceil(worst)


def rating_public(r: repo.StoredRating) -> dict[str, Any]:
    low, high = Rating(r.mu, r.sigma).interval95
    return {
        "role": r.role, "mu": r.mu, "sigma": r.sigma, "conservative": r.conservative,
        "ci_low": low, "ci_high": high, "games": r.games, "wins": r.wins, "draws": r.draws,
        "losses": r.losses,
    }


def agents_public(session: Session, agents: Sequence[repo.AgentInfo]) -> list[dict[str, Any]]:
    """``AgentPublic`` dicts of ``agents`` (ratings, owners and queues in a few queries)."""
    ids = [a.id for a in agents]
    ratings = repo.load_ratings(session, ids) if ids else {}
    by_agent: dict[int, list[repo.StoredRating]] = {}
    for (agent_id, _role), rating in sorted(ratings.items()):
        by_agent.setdefault(agent_id, []).append(rating)
    owner_ids = {a.owner_id for a in agents if a.owner_id is not None}
    owners = repo.user_names(session, owner_ids) if owner_ids else {}
    queues = {
        env: repo.queue_positions(session, env, WAITING)
        for env in {a.env_id for a in agents if a.status in WAITING}
    }
    out = []
    for a in agents:
        rated = by_agent.get(a.id, [])
        out.append({
            "id": a.id, "key": a.key, "name": a.name, "env": a.env_id, "kind": a.kind,
            "owner": owners.get(a.owner_id) if a.owner_id is not None else None,
            "status": a.status, "status_reason": a.status_reason, "created_at": a.created_at,
            "ratings": [rating_public(r) for r in rated],
            "queue_position": queues.get(a.env_id, {}).get(a.id),
            "expected_matches_to_settle": matches_to_settle(a.status, [r.sigma for r in rated]),
        })
    return out


def match_summaries(
    session: Session, matches: Sequence[repo.StoredMatch], *, full: bool = False,
    agent_ids: AgentIdLookup = repo.agent_ids_for_keys,
) -> list[dict[str, Any]]:
    """``MatchSummary`` (or with ``full``, ``MatchPublic``) dicts of ``matches``.

    Values have the response model's types (scores are floats), so a list of these
    serializes to the same JSON with or without the model.

    Args:
        agent_ids: Looks up ``{key: id}`` of an env's agents (e.g. through a cache).
    """
    keys_by_env: dict[str, set[str]] = {}
    for m in matches:
        keys_by_env.setdefault(m.env_id, set()).update(m.seats)
    ids = {env: agent_ids(session, env, keys) for env, keys in keys_by_env.items()}
    out = []
    for m in matches:
        body: dict[str, Any] = {
            "id": m.id, "seq": m.seq, "env": m.env_id, "seats": list(m.seats),
            "agent_ids": [ids[m.env_id].get(key) for key in m.seats],
            "scores": [float(s) for s in m.scores], "winner": m.winner,
            "termination": m.termination, "created_at": m.created_at,
        }
        if full:
            body.update(seed=m.seed, weights=list(m.weights), actions=[list(a) for a in m.actions],
                        forfeit_seat=m.forfeit_seat, detail=m.detail, rated=m.rated)
        out.append(body)
    return out
