"""``POST /challenges``: queue two agents' matches; ``GET /challenges/{id}``: how they went.

No request thread plays a match: the request checks the challenge, fixes its match ids
and seeds, queues it and answers 202; the background service plays it
(:mod:`arena.ladder.challenges`). Rated results come only from the ladder's own
pairings: a user's challenge is played and recorded unrated (it shows in the agents'
match history and never moves a rating), and asking for ``"rated": true`` without admin
rights is refused with 403. Only an admin (the operator's ``ARENA_ADMIN_TOKEN``) may
record a rated challenge.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime
from uuid import UUID

from fastapi import APIRouter, Response

from arena.api.deps import ServicesDep, StateDep, WriterDep
from arena.api.errors import error_responses
from arena.api.schemas import ChallengeCreate, ChallengePublic, MatchSummary
from arena.core.errors import Forbidden, UnknownChallenge
from arena.ladder.challenges import ChallengeState, load_challenge, plan_challenge, queue_challenge
from arena.ladder.work_queue import DONE, QUEUED
from arena.read.summaries import match_summaries
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services

router = APIRouter(tags=["challenges"])

USERS_UNRATED = ("challenges by users are unrated: ratings move only through the ladder's own pairings; "
                 "only the operator's admin token (ARENA_ADMIN_TOKEN) may ask for a rated challenge. "
                 "Ask again with \"rated\": false")
LOCATION = {"Location": {"description": "Where to poll the challenge: /api/v1/challenges/{id}.",
                         "schema": {"type": "string"}}}


@router.post("/challenges", status_code=202, response_model=ChallengePublic,
             responses={202: {"description": "Queued", "headers": LOCATION},
                        **error_responses(400, 401, 403, 404, 409, 422, 429)})
def create_challenge(body: ChallengeCreate, user: WriterDep, state: StateDep, response: Response) -> ChallengePublic:
    """Queue ``matches`` matches between the agents (one per team; seats alternate in
    symmetric games): 202 with the challenge (its id, status ``queued``, its match ids)
    and a ``Location`` to poll. The background service plays and records it. A user's
    challenge is unrated (the agents' match history shows it; no rating moves);
    ``"rated": true`` is for admins only (403 for anyone else). Each user may have
    ARENA_CHALLENGES_IN_FLIGHT challenges queued or playing at a time and ask for
    ARENA_CHALLENGE_MATCHES_PER_HOUR matches an hour."""
    if body.rated and not user.is_admin:
        raise Forbidden(USERS_UNRATED)
    services = state.services
    with nullcontext([]) if user.user_id is None else state.limits.challenge(user.user_id, body.matches) as holds:
        request = plan_challenge(services, user.name, body.env, list(body.agents), body.matches, body.rated)
        request = queue_challenge(services, request, holds)
    response.headers["Location"] = f"/api/v1/challenges/{request.id}"
    return _public(services, ChallengeState(request, QUEUED, recorded=0, error="", finished=0.0, attempts=0))


@router.get("/challenges/{challenge_id}", response_model=ChallengePublic, responses=error_responses(404, 422))
def get_challenge(challenge_id: UUID, services: ServicesDep) -> ChallengePublic:
    """A challenge's status (queued, playing, done, failed), its progress, and once done
    its matches' results. Records are kept a week after the challenge ends."""
    found = load_challenge(services.redis, services.pool.keys, str(challenge_id))
    if found is None:
        raise UnknownChallenge(f"no challenge {challenge_id} (unknown, or finished over a week ago)")
    return _public(services, found)


def _public(services: Services, found: ChallengeState) -> ChallengePublic:
    request = found.request
    results: list[MatchSummary] = []
    if found.status == DONE:
        with services.sessions() as session:
            by_id = {m["id"]: m for m in match_summaries(session, repo.get_matches(session, request.match_ids))}
        results = [MatchSummary(**by_id[m]) for m in request.match_ids if m in by_id]
    return ChallengePublic(
        id=request.id, status=found.status, env=request.env_id, agents=list(request.agent_ids),
        rated=request.rated, match_ids=request.match_ids, recorded=found.recorded, results=results,
        error=found.error or None, created_at=datetime.fromtimestamp(request.created, UTC),
        finished_at=datetime.fromtimestamp(found.finished, UTC) if found.finished else None)
