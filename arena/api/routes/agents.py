"""``/agents``: submit, list, inspect, retire; and an agent's rating history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from arena.api.deps import AgentIdPath, Principal, ServicesDep, SessionDep, StateDep, WriterDep, optional_user
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, AgentPublic, AgentsPublic, AgentUpdate, HistoryPublic
from arena.api.state import ApiState
from arena.api.upload import read_form
from arena.core.agent_status import AgentStatus
from arena.core.errors import Forbidden, InvalidParameter
from arena.ladder.submissions import FIELD_HELP, Submission, form_limits, parse_submission, submit_agent
from arena.read.summaries import agents_public
from arena.snapshots.formats import weights_suffix
from arena.storage.db import repositories as repo
from envs.errors import UnknownAgent
from envs.registry import get_spec, list_envs

# Routes at ``/agents/{agent_id:int}``: only digits reach them, so a path beside them
# (``/agents/connected``) answers another method with 405 and its Allow header, not a 422 about the id.
router = APIRouter(tags=["agents"])
CallerDep = Annotated[Principal | None, Depends(optional_user)]

UPLOAD_SCHEMA = {
    "required": True,
    "content": {"multipart/form-data": {"schema": {
        "type": "object",
        "required": ["weights", "spec", "env"],
        "properties": {
            "weights": {"type": "string", "format": "binary",
                        "description": "safetensors weights of a registry arch, or an ONNX "
                        "model (.onnx) when the spec's arch is \"onnx\"; at most "
                        "ARENA_MAX_UPLOAD_BYTES. See docs/onnx.md for what an ONNX model "
                        "must satisfy."},
            "spec": {"type": "string", "description": "agent.json: text or a file."},
            "env": {"type": "string", "description": "Env id; must equal the spec's env."},
            "name": {"type": "string", "description": "Display name (default: the spec's)."},
        },
    }}},
}


def _agent(session: Session, agent_id: int) -> repo.AgentInfo:
    agent = repo.get_agent(session, agent_id)
    if agent is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    return agent


def _owned(agent: repo.AgentInfo, user: Principal | None) -> bool:
    """Whether ``user`` is the agent's owner or an admin."""
    return user is not None and (user.is_admin or (agent.owner_id is not None and agent.owner_id == user.user_id))


def _downloadable(session: Session, agent_id: int, user: Principal | None) -> repo.AgentInfo:
    """The agent if ``user`` may download its weights: published, or theirs (or an admin's ask).

    Raises:
        UnknownAgent: No such agent, or one without weights (builtin, connected, human).
        Forbidden: A private agent of someone else.
    """
    agent = _agent(session, agent_id)
    if agent.snapshot_sha256 is None:
        raise UnknownAgent(f"agent {agent_id} is a {agent.kind} agent: it has no weights to download")
    if not agent.published and not _owned(agent, user):
        raise Forbidden(f"agent {agent_id} is private: its owner has not published its weights "
                        "(an owner publishes with PATCH /api/v1/agents/{id} {\"published\": true} "
                        "or `arena agent publish`)")
    return agent


@router.post(
    "/agents", status_code=201, response_model=AgentPublic,
    responses=error_responses(401, 409, 413, 422, 429, 503), openapi_extra={"requestBody": UPLOAD_SCHEMA},
    description=f"Submit a neural agent as multipart/form-data ({FIELD_HELP}). The spec's "
    "`arch` says what `weights` is: safetensors weights of a registry architecture (`mlp`, "
    "`cnn`), or an ONNX model for `\"arch\": \"onnx\"` (one float32 input `[batch, "
    "*obs_shape]` with a dynamic batch axis, one float32 output `[batch, num_actions]`, "
    "standard operators of opset 13-21, no external data). It is validated in full (an ONNX "
    "model also runs on probe batches of real observations, in a sandboxed worker process: one "
    "that crashes or is killed refuses the upload with 422, and 503 means no worker could be "
    "started) before anything is stored and "
    "starts out `queued`. Each user may submit ARENA_SUBMISSIONS_PER_DAY agents per env per UTC "
    "day (429 with Retry-After beyond that).",
)
async def create_agent(request: Request, user: WriterDep, state: StateDep) -> AgentPublic:
    """Submit a checkpoint; a rejected upload stores nothing (and uses none of the quota)."""
    return await receive_agent(request, user, state)


async def receive_agent(request: Request, user: Principal, state: ApiState,
                        tag: Callable[[Submission], Callable[[Session], Callable[[int], None]]] | None = None,
                        ) -> AgentPublic:
    """The one submission path: read the upload, validate it in full, store it (``tag``: what else the
    storing transaction checks and writes, e.g. a competition entry; see ``submit_agent``)."""
    services = state.services
    fields = await read_form(request, form_limits(services.settings.max_upload_bytes))
    submission = parse_submission(fields)
    tagged = None if tag is None else tag(submission)

    def submit() -> int:
        if user.user_id is None or submission.env not in {e.env_id for e in list_envs()}:
            return submit_agent(services, user.user_id, user.name, submission, tag=tagged)
        with state.limits.submission(user.user_id, submission.env):
            return submit_agent(services, user.user_id, user.name, submission, tag=tagged)

    agent_id = await run_in_threadpool(submit)

    def load() -> AgentPublic:
        with services.sessions() as session:
            return AgentPublic(**agents_public(session, [_agent(session, agent_id)])[0])

    return await run_in_threadpool(load)


@router.get("/agents", response_model=AgentsPublic, responses=error_responses(404, 422))
def list_agents(
    session: SessionDep,
    env: Annotated[str | None, Query(max_length=64, description="Env id.")] = None,
    owner: Annotated[str | None, Query(max_length=64, description="Owner's name or id.")] = None,
    status: AgentStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> AgentsPublic:
    """Agents, newest first."""
    if env is not None:
        get_spec(env)  # unknown env: 404 with the list of envs
    owner_id = None
    if owner is not None:
        user = (repo.get_user(session, int(owner)) if owner.isdigit() and int(owner) <= MAX_ID
                else repo.get_user_by_name(session, owner) if owner.isprintable() else None)
        if user is None:
            return AgentsPublic(data=[], count=0)
        owner_id = user.id
    page, total = repo.page_agents(session, env_id=env, owner_id=owner_id, status=status,
                                   limit=limit, offset=offset)
    return AgentsPublic(data=agents_public(session, page), count=total)


@router.get("/agents/{agent_id:int}", response_model=AgentPublic, responses=error_responses(404, 422))
def get_agent(agent_id: AgentIdPath, session: SessionDep) -> AgentPublic:
    """One agent, with its ratings and where it stands in the queue."""
    return AgentPublic(**agents_public(session, [_agent(session, agent_id)])[0])


@router.delete("/agents/{agent_id:int}", response_model=AgentPublic,
               responses=error_responses(401, 403, 404, 422, 429))
def retire_agent(agent_id: AgentIdPath, user: WriterDep, services: ServicesDep) -> AgentPublic:
    """Retire an agent (owner or admin): it leaves the ladder; its matches stay."""
    def retire(session: Session) -> None:
        agent = _agent(session, agent_id)
        if not user.is_admin and (agent.owner_id is None or agent.owner_id != user.user_id):
            raise Forbidden(f"agent {agent_id} is not yours; only its owner can retire it")
        if agent.status != AgentStatus.RETIRED:
            repo.set_agent_status(session, agent_id, AgentStatus.RETIRED, f"retired by {user.name}")

    services.sessions.write_transaction(retire, what=f"retiring agent {agent_id}")
    with services.sessions() as session:
        return AgentPublic(**agents_public(session, [_agent(session, agent_id)])[0])


@router.patch("/agents/{agent_id:int}", response_model=AgentPublic,
              responses=error_responses(400, 401, 403, 404, 422, 429))
def update_agent(agent_id: AgentIdPath, body: AgentUpdate, user: WriterDep, services: ServicesDep) -> AgentPublic:
    """Publish or unpublish an agent's weights (owner or admin): ``{"published": true}`` lets
    anyone download them (``GET /agents/{id}/weights`` and ``/spec``)."""
    def update(session: Session) -> None:
        agent = _agent(session, agent_id)
        if not _owned(agent, user):
            raise Forbidden(f"agent {agent_id} is not yours; only its owner can publish it")
        if agent.snapshot_sha256 is None:
            raise InvalidParameter(f"agent {agent_id} is a {agent.kind} agent: it has no weights to publish")
        repo.set_agent_published(session, agent_id, body.published)

    services.sessions.write_transaction(update, what=f"publishing agent {agent_id}")
    with services.sessions() as session:
        return AgentPublic(**agents_public(session, [_agent(session, agent_id)])[0])


@router.get("/agents/{agent_id}/weights", response_class=Response, responses={
    **error_responses(401, 403, 404, 422),
    200: {"content": {"application/octet-stream": {}},
          "description": "The weights file: safetensors, or an ONNX model (`agent-{id}.safetensors` or "
          "`.onnx`, header `X-Arena-Sha256`); its spec is `GET /agents/{id}/spec`."}})
def weights(agent_id: AgentIdPath, session: SessionDep, services: ServicesDep, user: CallerDep) -> Response:
    """Download a published agent's weights, byte for byte as submitted (the owner and admins:
    any of their agents). Builtin and connected agents have none: 404."""
    agent = _downloadable(session, agent_id, user)
    data, spec = services.pool.get(agent.snapshot_sha256)
    filename = f"agent-{agent_id}{weights_suffix(spec)}"
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"',
                             "X-Arena-Sha256": agent.snapshot_sha256})


@router.get("/agents/{agent_id}/spec", responses=error_responses(401, 403, 404, 422))
def spec(agent_id: AgentIdPath, session: SessionDep, user: CallerDep, response: Response) -> dict[str, Any]:
    """A published agent's spec JSON (what sits beside its weights file as ``agent.json``); the
    header ``X-Arena-Sha256`` names the weights it goes with."""
    agent = _downloadable(session, agent_id, user)
    stored = repo.snapshot_specs(session, [agent.snapshot_sha256]).get(agent.snapshot_sha256)
    if stored is None:
        raise UnknownAgent(f"agent {agent_id} has no stored spec")
    response.headers["X-Arena-Sha256"] = agent.snapshot_sha256
    return stored


@router.get("/agents/{agent_id}/history", response_model=HistoryPublic,
            responses=error_responses(404, 422))
def history(
    agent_id: AgentIdPath,
    session: SessionDep,
    role: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Latest points kept.")] = 1000,
) -> HistoryPublic:
    """The agent's rating after each rated match, oldest first (the latest ``limit``)."""
    agent = _agent(session, agent_id)
    roles = get_spec(agent.env_id).roles
    if role is not None and role not in roles:
        raise InvalidParameter(f"{agent.env_id} has no role {role[:32]!r}; its roles: "
                               f"{', '.join(dict.fromkeys(roles))}")
    points = repo.rating_points(session, agent_id, role, limit)
    data = [{"match_seq": s, "role": r, "mu": mu, "sigma": sigma, "created_at": t}
            for s, r, mu, sigma, t in points]
    return HistoryPublic(agent_id=agent_id, data=data)
