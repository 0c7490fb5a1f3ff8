"""Connected agents: register one (no weights), then play it over a WebSocket.

``POST /agents/connected`` registers (or finds, by owner and name) an agent that its
owner's process plays; ``/agents/{id}/connect`` is its WebSocket (protocol version 1,
docs/connected.md). The socket is bridged to Redis by :mod:`arena.connected.gateway`,
so the ladder's workers reach it from any process.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Annotated, Any

import redis.asyncio as aredis
from fastapi import APIRouter, Path, WebSocket
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect

from arena.api.deps import Principal, StateDep, WriterDep, client_address, principal_for_token
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, AgentPublic, ConnectedAgentCreate
from arena.connected.gateway import Connection, Releases, redis_client
from arena.connected.protocol import (
    CLOSE_FORBIDDEN,
    CLOSE_NOT_FOUND,
    CLOSE_PROTOCOL,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHORIZED,
    PROTOCOL_VERSION,
    ProtocolError,
    decode_frame,
    encode,
    parse_hello,
)
from arena.connected.slots import ConnectionSlots, Slot
from arena.connected.time_controls import time_control
from arena.ladder.people import play_token_agent
from arena.ladder.registration import register_connected_agent
from arena.read.summaries import agents_public
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import get_spec

log = logging.getLogger(__name__)
router = APIRouter(tags=["connected agents"])

HELLO_TIMEOUT_S = 10.0
"""A socket that has not said ``hello`` within this long is closed."""


def _slots(websocket: WebSocket, client: aredis.Redis, services: Services) -> ConnectionSlots:
    """The process's counter of sockets per user and per address (in Redis: every API process
    counts the same sockets)."""
    state = websocket.app.state
    slots = getattr(state, "connected_slots", None)
    if slots is None or slots.client is not client:
        slots = state.connected_slots = ConnectionSlots(client, services.pool.keys,
                                                        services.settings.connected_slot_ttl_s)
    return slots


def _redis(websocket: WebSocket, services: Services) -> aredis.Redis:
    """The process's asyncio Redis client for the gateway (one pool, made on first use)."""
    state = websocket.app.state
    client = getattr(state, "connected_redis", None)
    if client is None or getattr(state, "connected_redis_url", None) != services.redis_url:
        client = redis_client(services.redis_url)
        state.connected_redis, state.connected_redis_url = client, services.redis_url
    return client


@router.post(
    "/agents/connected", status_code=201, response_model=AgentPublic,
    responses={**error_responses(400, 401, 404, 422, 429),
               200: {"model": AgentPublic, "description": "The agent this user registered before "
                     "under the same name (and role)"}},
    description="Register an agent that your own process plays over the connected-agent protocol "
    "(a WebSocket at /api/v1/agents/{id}/connect; docs/connected.md): no weights are uploaded. The same "
    "name (and role) of the same user returns the agent made the first time (200). It enters "
    "`placement` at once and is scheduled while its client is connected.",
)
async def register_connected(body: ConnectedAgentCreate, user: WriterDep, state: StateDep) -> Any:
    services = state.services
    get_spec(body.env)  # unknown env: 404 with the list

    def register() -> tuple[dict, bool]:
        agent, created = services.sessions.write_transaction(
            lambda session: register_connected_agent(session, body.env, body.name, user.user_id, body.role),
            what=f"registering connected agent {body.name!r}")
        with services.sessions() as session:
            return agents_public(session, [agent])[0], created

    public, created = await run_in_threadpool(register)
    if not created:
        return JSONResponse(AgentPublic(**public).model_dump(mode="json"), status_code=200)
    return AgentPublic(**public)


@router.websocket("/agents/{agent_id}/connect")
async def connect(websocket: WebSocket, agent_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> None:
    """The connected agent's socket (protocol version 1; see docs/connected.md)."""
    services: Services = websocket.app.state.api.services
    releases: Releases = websocket.app.state.connected_releases
    client = _redis(websocket, services)
    slots = _slots(websocket, client, services)
    address = client_address(websocket)  # type: ignore[arg-type]
    await websocket.accept()
    limit = services.settings.connected_sockets_per_address
    with releases.handler():  # the app's shutdown waits until everything below is given back
        slot = await slots.take("address", _subject(address), limit)
        if slot is None:
            await websocket.close(CLOSE_TOO_MANY, "too many sockets from this address")
            return
        try:
            await _serve(websocket, services, releases, slots, slot, agent_id)
        except WebSocketDisconnect:
            pass
        finally:
            await releases.settle(slots.give(slot))


def _subject(text: str) -> str:
    """A limit's subject as a Redis key part (an odd address or name by its digest)."""
    ok = text and len(text) <= 120 and all(c.isalnum() or c in "_.:+-" for c in text)
    return text if ok else "sha256." + hashlib.sha256(text.encode()).hexdigest()


async def _refuse(websocket: WebSocket, code: int, detail: str, encoding: str = "json") -> None:
    frame = encode({"type": "error", "detail": detail}, encoding)
    try:
        await (websocket.send_bytes(frame) if isinstance(frame, bytes) else websocket.send_text(frame))
        await websocket.close(code, detail[:120])
    except (WebSocketDisconnect, RuntimeError):
        pass


async def receive_hello(websocket: WebSocket) -> dict | None:
    """The socket's first message, or ``None`` after :data:`HELLO_TIMEOUT_S`. Bounded with
    ``asyncio.timeout`` as the gateway's waits are (:mod:`arena.connected.gateway`): on Python
    3.11 ``wait_for`` returned a hello that arrived in the turn of a cancel, and the cancelled
    handler went on to serve the connection."""
    try:
        async with asyncio.timeout(HELLO_TIMEOUT_S):
            return await websocket.receive()
    except TimeoutError:
        return None


async def _serve(websocket: WebSocket, services: Services, releases: Releases, slots: ConnectionSlots,
                 address_slot: Slot, agent_id: int) -> None:
    message = await receive_hello(websocket)
    if message is None:
        await _refuse(websocket, CLOSE_PROTOCOL, f"no 'hello' within {HELLO_TIMEOUT_S:.0f}s")
        return
    if message["type"] == "websocket.disconnect":
        return
    raw = message.get("bytes") if message.get("bytes") is not None else message.get("text")
    try:
        hello = parse_hello(decode_frame(raw if raw is not None else b""))
    except ProtocolError as exc:
        await _refuse(websocket, CLOSE_PROTOCOL, str(exc))
        return
    token = hello.token or _bearer(websocket)
    if not token:
        await _refuse(websocket, CLOSE_UNAUTHORIZED, "send your API token in 'hello' or as 'Authorization: "
                                                     "Bearer <token>'", hello.encoding)
        return
    found = await run_in_threadpool(_authorize, services, token, agent_id)
    if isinstance(found[0], int):  # refused: (close code, reason)
        await _refuse(websocket, *found, hello.encoding)
        return
    principal, agent = found
    user_key = f"user.{principal.user_id}" if principal.user_id is not None else _subject(f"guest.{principal.name}")
    limit = services.settings.connected_per_user
    user_slot = await slots.take("user", user_key, limit)
    if user_slot is None:
        await _refuse(websocket, CLOSE_TOO_MANY, f"at most {limit} live connections per user", hello.encoding)
        return
    try:
        spec = get_spec(agent.env_id)
        team = next((t for t, role in enumerate(spec.roles) if agent.plays(role)), 0)
        welcome = {
            "type": "welcome", "protocol": PROTOCOL_VERSION, "encoding": hello.encoding,
            "batch_results": hello.batch_results,
            "agent": {"id": agent.id, "key": agent.key, "name": agent.name, "kind": agent.kind, "role": agent.role},
            "env": agent.env_id, "num_actions": spec.num_actions, "seat_team": list(spec.seat_team),
            "obs_shape": list(spec.obs_shapes[spec.teams[team][0]]),
            "time_control": time_control(agent.env_id, human=agent.kind == "human").to_json(),
        }
        connection = Connection(websocket, slots.client, services.pool.keys, agent.id, hello.encoding,
                                text=hello.text, batch_results=hello.batch_results,
                                slots=[address_slot, user_slot], limits=slots,
                                idle_s=services.settings.connected_idle_s,
                                send_timeout_s=services.settings.connected_send_timeout_s, releases=releases)
        log.info("agent %d connected", agent.id, extra={"agent_id": agent.id, "user": principal.name})
        await connection.run(welcome)
        log.info("agent %d disconnected after %d answers", agent.id, connection.answered,
                 extra={"agent_id": agent.id})
    finally:
        await releases.settle(slots.give(user_slot))


def _bearer(websocket: WebSocket) -> str | None:
    header = websocket.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _authorize(services: Services, token: str, agent_id: int) -> tuple[Principal, repo.AgentInfo] | tuple[int, str]:
    """``(principal, agent)``, or ``(close code, reason)`` when the token may not play it.

    ``token`` is an API token (its owner's agents), or a play token from ``POST
    /agents/{id}/play`` (:mod:`arena.ladder.people`), which plays only its human agent.
    """
    human_id = play_token_agent(services.redis, services.pool.keys, token)
    if human_id is not None:
        return _authorize_play(services, human_id, agent_id)
    principal = principal_for_token(services, token)
    if principal is None:
        return CLOSE_UNAUTHORIZED, "invalid or revoked API token"
    with services.sessions() as session:
        agent = repo.get_agent(session, agent_id)
    if agent is None or agent.kind not in ("connected", "human"):
        return CLOSE_NOT_FOUND, f"no connected agent with id {agent_id}"
    if agent.owner_id != principal.user_id and not principal.is_admin:
        return CLOSE_FORBIDDEN, f"agent {agent_id} is not yours"
    if agent.status in ("retired", "rejected"):
        return CLOSE_FORBIDDEN, f"agent {agent_id} is {agent.status}"
    return principal, agent


def _authorize_play(services: Services, human_id: int, agent_id: int) -> tuple[Principal, repo.AgentInfo] | \
        tuple[int, str]:
    """A play token's connection: its own human agent only, as the person who asked."""
    if human_id != agent_id:
        return CLOSE_FORBIDDEN, f"this play token plays agent {human_id}, not {agent_id}"
    with services.sessions() as session:
        agent = repo.get_agent(session, agent_id)
        owner = None if agent is None or agent.owner_id is None else repo.get_user(session, agent.owner_id)
    if agent is None or agent.kind != "human":
        return CLOSE_NOT_FOUND, f"no human agent with id {agent_id}"
    if agent.status in ("retired", "rejected"):
        return CLOSE_FORBIDDEN, f"agent {agent_id} is {agent.status}"
    # A guest has no user: named after its agent, so each guest counts its own connections.
    return Principal(user_id=agent.owner_id, name=owner.name if owner else agent.name, is_admin=False), agent
