"""``POST /challenges``: play two agents against each other now.

Rated results come only from the ladder's own pairings: a user's challenge is played
and recorded unrated (it shows in the agents' match history and never moves a
rating), and asking for ``"rated": true`` without admin rights is refused with 403.
Only an admin (the operator's ``ARENA_ADMIN_TOKEN``) may record a rated challenge.
"""

from __future__ import annotations

from contextlib import nullcontext

from fastapi import APIRouter

from arena.api.deps import StateDep, WriterDep
from arena.api.errors import error_responses
from arena.api.schemas import ChallengeCreate, ChallengePublic, MatchSummary
from arena.ladder.challenges import play_challenge
from arena.read.summaries import match_summaries
from envs.errors import Forbidden

router = APIRouter(tags=["challenges"])

USERS_UNRATED = ("challenges by users are unrated: ratings move only through the ladder's own pairings; "
                 "only the operator's admin token (ARENA_ADMIN_TOKEN) may ask for a rated challenge. "
                 "Ask again with \"rated\": false")


@router.post("/challenges", status_code=201, response_model=ChallengePublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def create_challenge(body: ChallengeCreate, user: WriterDep, state: StateDep) -> ChallengePublic:
    """Play ``matches`` matches between the agents (one per team; seats alternate in
    symmetric games) and record them. A user's challenge is unrated (the agents' match
    history shows it; no rating moves); ``"rated": true`` is for admins only (403 for
    anyone else). Each user may have ARENA_CHALLENGES_IN_FLIGHT challenges playing at a
    time and ask for ARENA_CHALLENGE_MATCHES_PER_HOUR matches an hour."""
    if body.rated and not user.is_admin:
        raise Forbidden(USERS_UNRATED)
    with nullcontext() if user.user_id is None else state.limits.challenge(user.user_id, body.matches):
        played = play_challenge(state.services.sessions, state.policies, user.name, body.env, list(body.agents),
                                body.matches, body.rated)
    with state.services.sessions() as session:
        results = [MatchSummary(**m) for m in match_summaries(session, played)]
    return ChallengePublic(match_ids=[m.id for m in played], results=results, rated=body.rated)
