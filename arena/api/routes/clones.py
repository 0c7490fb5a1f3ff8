"""``/agents/{id}/family``: an agent's versions, found by clone fingerprints (docs/evaluation.md).

The admin's side - near-duplicates of different owners - is part of ``GET /admin/integrity``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from arena.api.deps import AgentIdPath, SessionDep, StateDep
from arena.api.errors import error_responses
from arena.api.schemas import FamilyPublic
from arena.read.clones import family_data
from arena.storage.db import repositories as repo
from envs.errors import UnknownAgent

router = APIRouter(tags=["agents"])


@router.get(
    "/agents/{agent_id}/family", response_model=FamilyPublic,
    responses={202: {"model": FamilyPublic, "description": "Fingerprints are queued for the background service "
                     "(`status` pending): the family so far; ask again later."}, **error_responses(404, 422)},
)
def family(
    agent_id: AgentIdPath,
    session: SessionDep,
    state: StateDep,
) -> Any:
    """The agent's family: its owner's agents of the same env and role whose behaviour fingerprints
    match its own (the same best action on at least ``min_agreement`` of the positions and a mean KL
    divergence of at most ``max_kl``), i.e. its versions, each with its agreement and KL.

    Nothing is computed here: fingerprints are computed by the background service (when an agent
    passes validation, or queued by the first ask, one job per snapshot however many ask) and this
    answers from what is stored: 202 with ``status`` pending while some are queued, ``failed`` with
    the reason when the agent's policy cannot be fingerprinted. No token needed.
    """
    agent = repo.get_agent(session, agent_id)
    if agent is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    body = FamilyPublic(**family_data(session, state.fingerprints, agent))
    if body.status == "pending":
        return JSONResponse(body.model_dump(mode="json"), status_code=202)
    return body
