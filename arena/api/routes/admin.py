"""``/admin``: operator views (the ``ARENA_ADMIN_TOKEN`` or an admin user's token)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from arena.api.deps import AdminDep, SessionDep, StateDep
from arena.api.errors import error_responses
from arena.api.schemas import IntegrityPublic
from arena.read.clones import clones_data
from arena.read.evaluation import integrity_data
from arena.storage.db import repositories as repo
from envs.registry import get_spec

router = APIRouter(tags=["admin"])


@router.get("/admin/integrity", response_model=IntegrityPublic, responses=error_responses(401, 403, 404, 422))
def integrity(
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
    env: Annotated[str, Query(max_length=64, description="Env id.")],
) -> IntegrityPublic:
    """Integrity flags of an env's ladder, with the evidence: pairs whose head-to-head deviates from
    their ratings' prediction (throwing games to a partner), ratings that rest on one opponent, and
    agents of different owners that play as one policy (clone fingerprints: agreement and KL).

    A flag is a reason to look, not a verdict (docs/evaluation.md).
    """
    get_spec(env)
    version = repo.board_version(session, env)
    body = state.payoffs.get(("integrity", env), version, lambda: integrity_data(session, env))
    # Not cached with the body: a new submission moves no board version. The fingerprints are
    # only read (the missing ones queued for the background service, listed as pending).
    return IntegrityPublic(**body, clones=clones_data(session, state.fingerprints, env))
