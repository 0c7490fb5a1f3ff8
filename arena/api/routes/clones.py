"""``/agents/{id}/family``: an agent's versions, found by clone fingerprints (docs/evaluation.md).

The admin's side - near-duplicates of different owners - is part of ``GET /admin/integrity``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from arena.api.deps import Principal, SessionDep, StateDep, optional_user
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, FamilyPublic
from arena.read.clones import family_data
from arena.storage.db import repositories as repo
from envs.errors import UnknownAgent

router = APIRouter(tags=["agents"])


@router.get("/agents/{agent_id}/family", response_model=FamilyPublic, responses=error_responses(401, 404, 422))
def family(
    agent_id: Annotated[int, Path(ge=1, le=MAX_ID, description="Agent id.")],
    session: SessionDep,
    state: StateDep,
    caller: Annotated[Principal | None, Depends(optional_user)],
) -> FamilyPublic:
    """The agent's family: its owner's agents of the same env and role whose behaviour fingerprints
    match its own (the same best action on at least ``min_agreement`` of the positions and a mean KL
    divergence of at most ``max_kl``), i.e. its versions, each with its agreement and KL.

    Fingerprints are computed on the first ask and cached; only the owner's or an admin's
    request stores them in Redis (an anonymous read writes nothing).
    """
    agent = repo.get_agent(session, agent_id)
    if agent is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    persist = caller is not None and (caller.is_admin or caller.user_id == agent.owner_id)
    return FamilyPublic(**family_data(session, state.fingerprints, agent, persist=persist))
