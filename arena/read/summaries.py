"""Read models: stored rows turned into response bodies, with no N+1 queries.

Each function takes a whole page of rows and loads what they refer to (ratings,
owner names, queue positions, agent ids of seats) in one query per kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from arena.core.agent_status import AgentStatus
from arena.ladder.registration import ladder_rating_env
from arena.read.ratings import RatingStats, matches_to_settle
from arena.snapshots.formats import snapshot_format
from arena.storage.db import repositories as repo
from league.ratings.rating import RatingEnv

AgentIdLookup = Callable[[Session, str, set[str]], Mapping[str, int]]

def rating_public(r: repo.StoredRating, status: str, rating_env: RatingEnv) -> dict[str, Any]:
    """A ``RatingPublic`` dict: the role and its :class:`~arena.read.ratings.RatingStats`."""
    return {"role": r.role, **RatingStats.of(r, status, rating_env).model_dump()}


def policy_format(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """``format``, ``arch`` and ``hparams`` of a neural agent's stored spec (all ``None``
    for a builtin agent)."""
    if spec is None:
        return {"format": None, "arch": None, "hparams": None}
    return {"format": snapshot_format(spec), "arch": spec.get("arch"),
            "hparams": dict(spec.get("hparams") or {})}


def agents_public(session: Session, agents: Sequence[repo.AgentInfo]) -> list[dict[str, Any]]:
    """``AgentPublic`` dicts of ``agents`` (ratings, owners and queues in a few queries)."""
    ids = [a.id for a in agents]
    ratings = repo.load_ratings(session, ids) if ids else {}
    by_agent: dict[int, list[repo.StoredRating]] = {}
    for (agent_id, _role), rating in sorted(ratings.items()):
        by_agent.setdefault(agent_id, []).append(rating)
    owner_ids = {a.owner_id for a in agents if a.owner_id is not None}
    owners = repo.user_names(session, owner_ids) if owner_ids else {}
    rating_envs = {env: ladder_rating_env(session, env) for env in {a.env_id for a in agents}}
    queues = {
        env: repo.queue_positions(session, env)
        for env in {a.env_id for a in agents if AgentStatus(a.status).waiting}
    }
    specs = repo.snapshot_specs(session, (a.snapshot_sha256 for a in agents if a.snapshot_sha256))
    out = []
    for a in agents:
        rated = by_agent.get(a.id, [])
        out.append({
            "id": a.id, "key": a.key, "name": a.name, "env": a.env_id, "kind": a.kind,
            **policy_format(specs.get(a.snapshot_sha256) if a.snapshot_sha256 else None),
            "owner": owners.get(a.owner_id) if a.owner_id is not None else None, "role": a.role,
            "status": a.status, "status_reason": a.status_reason, "created_at": a.created_at,
            "ratings": [rating_public(r, a.status, rating_envs[a.env_id]) for r in rated],
            "queue_position": queues.get(a.env_id, {}).get(a.id),
            "expected_matches_to_settle": matches_to_settle(a.status, [r.sigma for r in rated],
                                                            rating_envs[a.env_id]),
            "published": a.published,
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
