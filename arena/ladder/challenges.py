"""Challenges: a user asks agents to play now; the background service plays them.

No request thread plays a match. ``POST /challenges`` calls

1. :func:`plan_challenge`: the checks (env, one agent per team in role order, agents
   of that env and not finished, placed agents for a rated challenge, connected agents
   online, stored weights), then the match ids and seeds, fixed before anything plays;
2. :func:`queue_challenge`: the challenge's record (a Redis hash: its request, status,
   progress) and its id on the challenge queue, in one transaction.

The background service's :class:`~arena.ladder.challenge_queue.ChallengeQueue` pops it
and plays it on the :class:`~arena.ladder.lane.ConnectedLane`'s threads (builtins by
name, neural agents through the lane's bounded snapshot cache, connected agents over
the broker like any match of theirs). Rated challenges (admins only) are recorded
through the ladder's :class:`~arena.ladder.recorder.MatchRecorder` (ratings in the same
transaction); unrated ones with ``rated = false`` plus their participants, so they
appear in the agents' match history but never move a rating. Both skip match ids
already stored, so a challenge played again after its service died counts each match
once. ``GET /challenges/{id}`` reads the record (:func:`load_challenge`):
``queued``, ``playing`` (with how many matches are recorded), ``done`` or ``failed``
(with why).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from dataclasses import asdict, dataclass, replace

import redis

from arena.core.agent_status import AgentStatus
from arena.core.errors import Conflict, InvalidParameter
from arena.core.limits import Hold, take_holds
from arena.engine.plan import plan_matches
from arena.ladder.dispatch import CONNECTED_KINDS
from arena.ladder.work_queue import QUEUED, WorkQueue
from arena.snapshots.keys import RedisKeys
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.errors import UnknownAgent
from envs.registry import get_spec
from envs.spec import EnvSpec

log = logging.getLogger(__name__)

__all__ = [
    "ChallengeRequest", "ChallengeState", "challenge_queue", "check_agents", "load_challenge", "plan_challenge",
    "queue_challenge",
]


@dataclass(frozen=True)
class ChallengeRequest:
    """One challenge, as queued for the background service (JSON in its Redis record).

    Attributes:
        id: The challenge's id (a UUID).
        user: Who asked (for the log).
        env_id: The env.
        agent_ids: Agent id per team, in team order.
        rated: Recorded through the ladder's ratings (admins only).
        jobs: ``(match id, seed, agent id per team)`` of every match, fixed when it was queued.
        created: Unix seconds it was queued.
        holds: In-flight counters (:meth:`arena.core.limits.Limits.challenge`) to give
            back when it is done or failed.
    """

    id: str
    user: str
    env_id: str
    agent_ids: tuple[int, ...]
    rated: bool
    jobs: tuple[tuple[str, int, tuple[int, ...]], ...]
    created: float
    holds: tuple[str, ...] = ()

    @property
    def match_ids(self) -> list[str]:
        return [match_id for match_id, _, _ in self.jobs]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes | str) -> ChallengeRequest:
        data = json.loads(raw)
        jobs = tuple((m, int(s), tuple(int(a) for a in lineup)) for m, s, lineup in data["jobs"])
        return cls(**{**data, "agent_ids": tuple(data["agent_ids"]), "jobs": jobs, "holds": tuple(data["holds"])})


@dataclass(frozen=True)
class ChallengeState:
    """A challenge's record as stored now.

    Attributes:
        request: What was asked.
        status: ``queued``, ``playing``, ``done`` or ``failed``.
        recorded: Its matches recorded so far.
        error: Why it failed (empty otherwise).
        finished: Unix seconds it was done or failed (0: not yet).
        attempts: How often a service started playing it.
    """

    request: ChallengeRequest
    status: str
    recorded: int
    error: str
    finished: float
    attempts: int


def check_agents(spec: EnvSpec, agents: dict[int, repo.AgentInfo], ids: list[int] | tuple[int, ...],
                 rated: bool) -> None:
    """Every agent known, of ``spec``'s env, not finished, and placed for a rated challenge.

    Raises:
        UnknownAgent / InvalidParameter / Conflict: Which agent is wrong, and how.
    """
    unknown = [i for i in ids if i not in agents]
    if unknown:
        raise UnknownAgent(f"no agent with id {unknown[0]}")
    for agent_id in ids:
        agent = agents[agent_id]
        if agent.env_id != spec.env_id:
            raise InvalidParameter(f"agent {agent_id} plays {agent.env_id}, not {spec.env_id}")
        status = AgentStatus(agent.status)
        if status.finished:
            raise Conflict(f"agent {agent_id} is {agent.status} and plays no more matches")
        if rated and not status.plays_rated:
            raise Conflict(
                f"agent {agent_id} is {agent.status}; rated challenges need agents in "
                f"placement or rated (or ask for an unrated challenge)"
            )


def _check_lineup(services: Services, spec: EnvSpec, lineup: list[repo.AgentInfo]) -> None:
    """Each agent can play its team's role now (without loading any weights)."""
    for team, agent in enumerate(lineup):
        plays = agent.role
        if agent.kind == "neural":
            if agent.snapshot_sha256 is None:
                raise Conflict(f"agent {agent.id} has no stored weights")
            # The agent's own role: weights shared by a hider and a seeker keep the spec
            # of their first submission.
            plays = plays or services.pool.record(agent.snapshot_sha256).spec.get("role")
        elif agent.kind == "human":
            raise Conflict(f"agent {agent.id} is a person; people play when they ask (the Play button)")
        elif agent.kind in CONNECTED_KINDS:
            if services.connected_policies().broker.presence(agent.id) is None:
                raise Conflict(f"agent {agent.id} is played by its owner's program, which is offline now; "
                               "try later")
        elif agent.key.startswith("file:"):
            raise InvalidParameter(f"agent {agent.id} is a server-side file agent; it cannot be challenged")
        role = spec.roles[team]
        if plays not in (None, role):
            raise InvalidParameter(
                f"agent {agent.id} plays role {plays!r}, but team {team} of "
                f"{spec.env_id} is {role!r}; list the agents in role order {list(spec.roles)}"
            )


def plan_challenge(services: Services, user: str, env_id: str, agent_ids: list[int], matches: int,
                   rated: bool) -> ChallengeRequest:
    """Check a challenge of ``matches`` matches between ``agent_ids`` (one per team) and fix
    its match ids and seeds; nothing is stored.

    Raises:
        UnknownEnv / UnknownAgent: Unknown env or agent id.
        InvalidParameter: Wrong number of agents, an agent of another env or role.
        Conflict: An agent is retired/rejected, not yet placed for a rated challenge, a
            person, or a program that is offline.
    """
    spec = get_spec(env_id)
    if len(agent_ids) != spec.num_teams:
        raise InvalidParameter(
            f"{env_id} has {spec.num_teams} teams ({', '.join(spec.roles)}): "
            f"give exactly {spec.num_teams} agent ids, one per team"
        )
    with services.sessions() as session:
        agents = repo.get_agents(session, agent_ids)
    check_agents(spec, agents, agent_ids, rated)
    _check_lineup(services, spec, [agents[i] for i in agent_ids])
    planned = plan_matches([str(i) for i in agent_ids], spec, matches, seed=secrets.randbits(62))
    jobs = tuple((job.match_id, job.seed, tuple(int(a) for a in job.agents)) for job in planned)
    return ChallengeRequest(id=str(uuid.uuid4()), user=user, env_id=env_id, agent_ids=tuple(agent_ids),
                            rated=rated, jobs=jobs, created=time.time())


def challenge_queue(client: redis.Redis, keys: RedisKeys, **options: float) -> WorkQueue:
    """The durable queue of challenges (:mod:`arena.ladder.work_queue`); ``options``: its
    ``stale_s`` and ``max_attempts``."""
    return WorkQueue(client, keys.work_queue("challenges"), **options)


def queue_challenge(services: Services, request: ChallengeRequest, holds: list[Hold] | None = None) -> ChallengeRequest:
    """Store ``request``'s record (``queued``) and queue it for the background service, taking
    ``holds`` (the user's in-flight counts, handed to the record so its player gives them back)
    in the same transaction; the request as queued.

    Raises:
        TooManyRequests: A hold is full; nothing was queued.
    """
    holds = holds or []
    request = replace(request, holds=tuple(h.key for h in holds))
    queue = challenge_queue(services.redis, services.pool.keys)
    take_holds(services.redis, holds,
               write=lambda pipe: queue.put(pipe, request.id, request.to_json(), request.created, recorded=0))
    log.info("%s queued challenge %s: %d %s %s match(es) between %s", request.user, request.id,
             len(request.jobs), "rated" if request.rated else "unrated", request.env_id, list(request.agent_ids))
    return request


def load_challenge(client: redis.Redis, keys: RedisKeys, challenge_id: str) -> ChallengeState | None:
    """The challenge's record; ``None`` if there is none (unknown, or expired)."""
    record = client.hgetall(keys.work_queue("challenges").record(challenge_id))
    fields = {k.decode(): v.decode() for k, v in record.items()}
    if "request" not in fields:
        return None
    return ChallengeState(ChallengeRequest.from_json(fields["request"]), fields.get("status", QUEUED),
                          int(fields.get("recorded") or 0), fields.get("error", ""),
                          float(fields.get("finished") or 0), int(fields.get("attempts") or 0))
