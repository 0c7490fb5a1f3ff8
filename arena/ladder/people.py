"""People against agents: a play request from the API, a match in the background service.

The API process never plays a match. ``POST /api/v1/agents/{id}/play`` calls
:func:`open_game`, which

1. registers (or finds) the person's ``human`` agent: a signed-in user plays as their
   own human agent of the env (one per user per env, named after the user, rated on
   the env's humans board: :mod:`arena.read.humans`); anybody else as a fresh guest
   (``guest-<random>``, no owner, on no board, retired after its one game);
2. counts the game against the person's open games (Redis counters, given back when
   the match is recorded), so nobody holds the service's match threads with games
   they never finish;
3. stores a play token, a random secret that lets a WebSocket ``hello`` connect as
   that human agent and no other (:func:`play_token_agent`) until the match ends (for
   :data:`PLAY_TOKEN_TTL_S` at most);
4. queues a :class:`PlayRequest` on the durable queue of people's games
   (:mod:`arena.ladder.work_queue`, the one challenges use), with the token, in one
   Redis transaction.

The background service's :class:`HumanMatchQueue` claims the request (an owner and a
heartbeat) and plays the match in the :class:`~arena.ladder.lane.ConnectedLane`, which
stores it unrated: a person's result never moves an agent's rating. The person's
client has the human clock (:data:`arena.connected.time_controls.HUMAN`): a client
that never connects forfeits with ``disconnected`` after its grace. A service that
dies with the game claimed leaves it to the next (its heartbeat lapses, the sweep
queues it again, the person's client connects again with the same token); a match
already recorded is not played again. When the game is done or failed (not started
within :data:`START_WITHIN_S` of being queued, started :data:`~arena.ladder.work_queue.MAX_ATTEMPTS`
times), exactly once, its open-game counts are given back, its play token ends and a
guest's agent retires (the retention prunes retired guests: :mod:`arena.ladder.retention`).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from concurrent.futures import Future
from dataclasses import asdict, dataclass

import redis

from arena.core.agent_status import ACTIVE, AgentStatus
from arena.core.errors import Conflict, Forbidden, InvalidParameter
from arena.core.limits import IN_FLIGHT_TTL_S, Hold, take_holds
from arena.engine import MatchJob
from arena.ladder.dispatch import CONNECTED_KINDS, agent_source
from arena.ladder.lane import ConnectedLane
from arena.ladder.registration import register_connected_agent
from arena.ladder.work_queue import HEARTBEAT_S, STALE_S, SWEEP_S, Claim, QueueWorker, WorkQueue, finished_future
from arena.snapshots.keys import RedisKeys
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.errors import ArenaError, UnknownAgent

log = logging.getLogger(__name__)

PLAYABLE_ENVS = ("connect_four-v3", "tictactoe-v3", "rps-v2")
"""Envs people can play in the browser (the play page draws their boards)."""
PLAY_TOKEN_TTL_S = 3600
"""The longest a play token lets its WebSocket connect (it ends with its match)."""
START_WITHIN_S = 120.0
"""A play request the service has not started within this long of being queued is dropped
(its page gave up)."""
OPEN_GAMES = 3
"""Games a signed-in user, or an address playing as guests, may have open at once."""
OPEN_GAMES_TTL_S = IN_FLIGHT_TTL_S
"""An open game's count outlives its Redis record by at most this long (a game of
connect four at the human clock lasts under half an hour)."""
OPEN_GAMES_NAME = "open-games"
GUEST_DONE = "a guest's one game is over"


@dataclass(frozen=True)
class Person:
    """Who asks to play.

    Attributes:
        user_id: The signed-in user (``None``: a guest).
        name: The user's name (their human agent's name).
        address: The client address (counts a guest's open games).
    """

    user_id: int | None
    name: str
    address: str


@dataclass(frozen=True)
class PlayRequest:
    """One person's match, as queued for the background service (JSON in Redis).

    Attributes:
        match_id: The match's id, known to the person before it starts.
        env_id: The env.
        agent_id: The agent the person plays.
        human_agent_id: The person's human agent.
        seat: The person's seat.
        seed: The match seed (recorded: the replay re-simulates from it).
        guest: The human agent is a guest's (retired after this game).
        holds: Open-game counter keys to give back when the match ends.
        created: Unix seconds the request was made.
        token_sha256: The play token's key: it stops working when the match ends (so a
            token seen once cannot play the person's next game).
    """

    match_id: str
    env_id: str
    agent_id: int
    human_agent_id: int
    seat: int
    seed: int
    guest: bool
    holds: tuple[str, ...]
    created: float
    token_sha256: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes | str) -> PlayRequest:
        data = json.loads(raw)
        return cls(**{**data, "holds": tuple(data["holds"])})


@dataclass(frozen=True)
class Ticket:
    """What the person's page needs to play: the match, its seat, how to connect."""

    match_id: str
    human_agent_id: int
    seat: int
    play_token: str
    ws_path: str


def token_sha256(token: str) -> str:
    """The key a play token is stored under (the token itself is never stored): hashed as an API token is."""
    return repo.hash_token(token)


def play_token_agent(client: redis.Redis, keys: RedisKeys, token: str) -> int | None:
    """The human agent ``token`` may connect as; ``None`` if it is not a live play token."""
    if not token or len(token) > 512:
        return None
    raw = client.get(keys.play_token(token_sha256(token)))
    return None if raw is None else int(raw)


def open_game(services: Services, agent_id: int, person: Person, seat: int | None) -> Ticket:
    """Open a match between ``person`` and agent ``agent_id`` and queue it for the service.

    Args:
        services: Database and Redis.
        agent_id: The agent to play (active, of a :data:`PLAYABLE_ENVS` env).
        person: Who plays it.
        seat: The person's seat (0 moves first); ``None``: drawn at random.

    Raises:
        UnknownAgent: No agent ``agent_id``.
        InvalidParameter: Its env cannot be played in the browser, or ``seat`` is out of range.
        Conflict: It is not active, or it is a program or person that cannot play now.
        Forbidden: The person's own human agent of the env was retired.
        TooManyRequests: The person has :data:`OPEN_GAMES` games open (or one in this env).
    """
    with services.sessions() as session:
        agent = repo.get_agent(session, agent_id)
    if agent is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    reason = unplayable_reason(agent)
    if agent.env_id not in PLAYABLE_ENVS:
        raise InvalidParameter(reason)
    if reason:
        raise Conflict(reason)
    if agent.kind in CONNECTED_KINDS and services.connected_policies().broker.presence(agent.id) is None:
        raise Conflict(f"agent {agent.id} is played by its owner's program, which is offline now; try later")
    if seat is not None and seat not in (0, 1):
        raise InvalidParameter("seat must be 0 (move first), 1 (move second) or null (either)")
    human = _human_agent(services, agent.env_id, person)
    keys = services.pool.keys
    holds = _open_game_holds(keys, person, agent.env_id)
    token = secrets.token_urlsafe(32)
    request = PlayRequest(
        match_id=str(uuid.uuid4()), env_id=agent.env_id, agent_id=agent.id, human_agent_id=human.id,
        seat=secrets.randbelow(2) if seat is None else seat, seed=secrets.randbits(62),
        guest=person.user_id is None, holds=tuple(h.key for h in holds), created=time.time(),
        token_sha256=token_sha256(token))

    def write(pipe: redis.client.Pipeline) -> None:
        pipe.set(keys.play_token(request.token_sha256), str(human.id), ex=PLAY_TOKEN_TTL_S)
        people_queue(services.redis, keys).put(pipe, request.match_id, request.to_json(), request.created)

    take_holds(services.redis, holds, write, OPEN_GAMES_TTL_S, retry_after_s=30)
    log.info("%s opened a game against agent %d (%s), match %s", human.name, agent.id, agent.env_id,
             request.match_id, extra={"agent_id": agent.id, "match_id": request.match_id})
    return Ticket(request.match_id, human.id, request.seat, token, f"/api/v1/agents/{human.id}/connect")


def unplayable_reason(agent: repo.AgentInfo) -> str:
    """Why people cannot play ``agent`` (empty: they can, once a program's client is online)."""
    if agent.env_id not in PLAYABLE_ENVS:
        return (f"{agent.env_id} cannot be played in the browser; people can play agents of "
                f"{', '.join(PLAYABLE_ENVS)}")
    if agent.status not in ACTIVE:
        return f"agent {agent.id} is {agent.status}; people play agents in placement or rated"
    if agent.kind == "human":
        return f"agent {agent.id} is a person; play an agent"
    return ""


def _human_agent(services: Services, env_id: str, person: Person) -> repo.AgentInfo:
    """The person's human agent of ``env_id``: the user's own, or a fresh guest."""
    name = person.name if person.user_id is not None else f"guest-{secrets.token_hex(4)}"

    def register(session) -> repo.AgentInfo:
        human, _ = register_connected_agent(session, env_id, name, person.user_id, None, kind="human")
        if human.status in ACTIVE and human.status_reason:
            # A person is never waiting for anything: it plays when it asks (off the "waiting" lists).
            repo.set_agent_status(session, human.id, AgentStatus(human.status), "")
        return human

    human = services.sessions.write_transaction(register, what=f"registering {name} to play {env_id}")
    if human.status not in ACTIVE:
        raise Forbidden(f"your human agent of {env_id} (id {human.id}) is {human.status}")
    return human


def _open_game_holds(keys: RedisKeys, person: Person, env_id: str) -> list[Hold]:
    """The open-game counts of one more game of ``person``, taken with the game's queue record.

    A user has at most :data:`OPEN_GAMES` open, and one per env (their human agent of
    an env holds one connection at a time); guests of one address share :data:`OPEN_GAMES`.
    """
    finish = "finish one (or let it time out) first"
    everywhere = f"too many open games: at most {OPEN_GAMES} at a time; {finish}"
    if person.user_id is None:
        return [Hold(keys.busy(OPEN_GAMES_NAME, f"address:{person.address}"), OPEN_GAMES, everywhere)]
    return [Hold(keys.busy(OPEN_GAMES_NAME, f"user:{person.user_id}:{env_id}"), 1,
                 f"too many open games: at most 1 of {env_id} at a time; {finish}"),
            Hold(keys.busy(OPEN_GAMES_NAME, f"user:{person.user_id}"), OPEN_GAMES, everywhere)]


def people_queue(client: redis.Redis, keys: RedisKeys, **options: float) -> WorkQueue:
    """The durable queue of people's games (:mod:`arena.ladder.work_queue`); ``options``: its
    ``stale_s`` and ``max_attempts``."""
    return WorkQueue(client, keys.work_queue("people"), **options)


class HumanMatchQueue(QueueWorker):
    """The background service's consumer of people's games: one small thread claims them,
    the lane's human threads play them.

    Args:
        services: Database and Redis.
        lane: Where the matches are played (and stored, unrated).
        poll_s: Longest wait for a queued game before heartbeats and sweeps.
        stale_s / heartbeat_s / sweep_s: The queue's timings (:mod:`arena.ladder.work_queue`).
    """

    def __init__(self, services: Services, lane: ConnectedLane, poll_s: float = 1.0, *, stale_s: float = STALE_S,
                 heartbeat_s: float = HEARTBEAT_S, sweep_s: float = SWEEP_S) -> None:
        super().__init__(people_queue(services.redis, services.pool.keys, stale_s=stale_s), lane.human_threads,
                         "person's game", poll_s=poll_s, heartbeat_s=heartbeat_s, sweep_s=sweep_s)
        self.services = services
        self.lane = lane
        self.keys = services.pool.keys

    def begin(self, claim: Claim) -> Future:
        """Play the game's match in the lane (the future holds its record), unless it waited
        too long (it fails) or is recorded already (it is done)."""
        request = PlayRequest.from_json(claim.record["request"])
        if time.time() - (claim.queued_at or request.created) > START_WITHIN_S:
            raise ArenaError(f"not started within {START_WITHIN_S:.0f} s of being queued; its page gave up")
        with self.services.sessions() as session:
            if repo.existing_match_ids(session, [request.match_id]):
                return finished_future()  # its service died after recording it
            found = repo.get_agents(session, [request.agent_id, request.human_agent_id])
        gone = [i for i in (request.agent_id, request.human_agent_id) if i not in found]
        if gone:  # no retry brings it back
            raise UnknownAgent(f"agent {gone[0]} is gone")
        agent, human = found[request.agent_id], found[request.human_agent_id]
        seats = (human.key, agent.key) if request.seat == 0 else (agent.key, human.key)
        job = MatchJob(seed=request.seed, agents=seats, match_id=request.match_id)
        sources = {a.key: agent_source(a) for a in (agent, human)}
        return self.lane.play_human(request.env_id, job, sources, {a.key: a.id for a in (agent, human)})

    def releases(self, claim: Claim) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The open game's counts are given back and its play token ends with the game's finish."""
        request = PlayRequest.from_json(claim.record["request"])
        return tuple(request.holds), (self.keys.play_token(request.token_sha256),)

    def ended(self, claim: Claim, status: str, error: str) -> None:
        """A guest's agent retires after its one game."""
        request = PlayRequest.from_json(claim.record["request"])
        if request.guest:
            try:
                self.services.sessions.write_transaction(
                    lambda s: repo.set_agent_status(s, request.human_agent_id, AgentStatus.RETIRED, GUEST_DONE),
                    what=f"retiring guest agent {request.human_agent_id}")
            except Exception:
                log.warning("could not retire guest agent %d", request.human_agent_id, exc_info=True)
