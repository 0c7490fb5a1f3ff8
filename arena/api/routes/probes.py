"""``/agents/{id}/probes``: exploitability probes of an agent, queued on request, run in the background."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query
from starlette.concurrency import run_in_threadpool

from arena.api.deps import ServicesDep, SessionDep, UserDep
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, ProbeCreate, ProbePublic, ProbesPublic
from arena.evaluation.probes import queue_probe
from arena.read.evaluation import probe_public
from arena.storage.db import repositories as repo
from envs.errors import Forbidden, UnknownAgent

router = APIRouter(tags=["probes"])
AgentIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="Agent id.")]


@router.post(
    "/agents/{agent_id}/probes", status_code=202, response_model=ProbePublic,
    responses=error_responses(400, 401, 403, 404, 422, 503),
    description="Queue an exploitability probe (owner or admin): a PPO best response trains against the "
    "frozen agent for `budget_env_steps` env steps, then plays it; the result is its win rate with a 95% "
    "interval (high = exploitable). Answers 202 with the probe (queued, or the open probe with the same "
    "budget and seed); poll `GET /agents/{id}/probes`. Two-player envs with a vectorized core only.",
)
async def create_probe(agent_id: AgentIdPath, user: UserDep, services: ServicesDep,
                       body: Annotated[ProbeCreate | None, Body()] = None) -> ProbePublic:
    body = body or ProbeCreate()

    def queue() -> ProbePublic:
        with services.sessions() as session:
            agent = repo.get_agent(session, agent_id)
        if agent is None:
            raise UnknownAgent(f"no agent with id {agent_id}")
        if not user.is_admin and (agent.owner_id is None or agent.owner_id != user.user_id):
            raise Forbidden(f"agent {agent_id} is not yours; only its owner or an admin can probe it")
        probe, _ = queue_probe(services, agent_id, user.name, budget_env_steps=body.budget_env_steps,
                               seed=body.seed, may_exceed_budget=user.is_admin)
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
