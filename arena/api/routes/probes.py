"""``/agents/{id}/probes``: exploitability probes of an agent, queued on request, run in the background."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response
from starlette.concurrency import run_in_threadpool

from arena.api.deps import AgentIdPath, ServicesDep, SessionDep, WriterDep
from arena.api.errors import error_responses
from arena.api.schemas import ProbeCreate, ProbePublic, ProbesPublic
from arena.core.errors import Forbidden
from arena.evaluation.probes import queue_probe
from arena.read.evaluation import probe_public
from arena.storage.db import repositories as repo
from envs.errors import UnknownAgent

router = APIRouter(tags=["probes"])


@router.post(
    "/agents/{agent_id}/probes", status_code=202, response_model=ProbePublic,
    responses={200: {"model": ProbePublic, "description": "The agent's probe at that budget, asked for before."},
               **error_responses(400, 401, 403, 404, 422, 429, 503)},
    description="Queue an exploitability probe (owner or admin): a PPO best response trains against the "
    "frozen agent for `budget_env_steps` env steps, then plays it; the result is its win rate with a 95% "
    "interval (high = exploitable). Answers 202 with the queued probe; at one budget an agent has one probe "
    "whatever the seed, so asking again answers 200 with the queued, running or finished one (a failed one "
    "is queued again). Poll `GET /agents/{id}/probes`. A user may have ARENA_PROBES_QUEUED_PER_USER probes "
    "queued or running and ask for ARENA_PROBES_PER_USER_PER_DAY a UTC day (429 beyond, with Retry-After); "
    "the workers serve users in turn. Two-player envs with a vectorized core only.",
)
async def create_probe(agent_id: AgentIdPath, user: WriterDep, services: ServicesDep, response: Response,
                       body: Annotated[ProbeCreate | None, Body()] = None) -> ProbePublic:
    body = body or ProbeCreate()

    def queue() -> ProbePublic:
        with services.sessions() as session:
            agent = repo.get_agent(session, agent_id)
        if agent is None:
            raise UnknownAgent(f"no agent with id {agent_id}")
        if not user.is_admin and (agent.owner_id is None or agent.owner_id != user.user_id):
            raise Forbidden(f"agent {agent_id} is not yours; only its owner or an admin can probe it")
        if agent.kind == "human":
            raise Forbidden("people are not probed")
        if agent.kind == "connected" and agent.owner_id != user.user_id:
            raise Forbidden(f"agent {agent_id} is a connected agent: a probe would spend its owner's compute, "
                            "so only its owner can ask for one")
        probe, created = queue_probe(services, agent_id, user.name, budget_env_steps=body.budget_env_steps,
                                     seed=body.seed, may_exceed_budget=user.is_admin, quota=not user.is_admin)
        if not created:
            response.status_code = 200
        return ProbePublic(**probe_public(probe))

    return await run_in_threadpool(queue)


@router.get("/agents/{agent_id}/probes", response_model=ProbesPublic, responses=error_responses(404, 422))
def list_probes(agent_id: AgentIdPath, session: SessionDep,
                limit: Annotated[int, Query(ge=1, le=200)] = 20) -> ProbesPublic:
    """The agent's probes, newest first, with progress while running."""
    if repo.get_agent(session, agent_id) is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    probes = repo.agent_probes(session, agent_id, limit)
    return ProbesPublic(data=[ProbePublic(**probe_public(p)) for p in probes], count=len(probes))
