"""``POST /challenges``: play two agents against each other now."""

from __future__ import annotations

from contextlib import nullcontext

from fastapi import APIRouter

from arena.api.deps import StateDep, WriterDep
from arena.api.errors import error_responses
from arena.api.schemas import ChallengeCreate, ChallengePublic, MatchSummary
from arena.ladder.challenges import play_challenge
from arena.read.summaries import match_summaries

router = APIRouter(tags=["challenges"])


@router.post("/challenges", status_code=201, response_model=ChallengePublic,
             responses=error_responses(400, 401, 404, 409, 422, 429))
def create_challenge(body: ChallengeCreate, user: WriterDep, state: StateDep) -> ChallengePublic:
    """Play ``matches`` matches between the agents (one per team; seats alternate in
    symmetric games) and record them, rated or not. Each user may have
    ARENA_CHALLENGES_IN_FLIGHT challenges playing at a time and ask for
    ARENA_CHALLENGE_MATCHES_PER_HOUR matches an hour."""
    with nullcontext() if user.user_id is None else state.limits.challenge(user.user_id, body.matches):
        played = play_challenge(state.services.sessions, state.policies, user.name, body.env, list(body.agents),
                                body.matches, body.rated)
    with state.services.sessions() as session:
        results = [MatchSummary(**m) for m in match_summaries(session, played)]
    return ChallengePublic(match_ids=[m.id for m in played], results=results)
