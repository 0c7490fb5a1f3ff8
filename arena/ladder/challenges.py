"""Challenges: a user asks two agents to play now; the server plays and records it.

The matches run in-process on :func:`arena.engine.play_matches` (guards, forfeits and
time budgets as everywhere else). Builtin agents are built by name; neural agents come
from the API's bounded snapshot cache. Rated challenges go through the ladder's
:class:`~arena.ladder.recorder.MatchRecorder` (exactly-once, ratings in the same
transaction); unrated ones are stored with ``rated = false`` plus their participants,
so they appear in the agents' match history but never move a rating.
"""

from __future__ import annotations

import logging
import secrets

from agents.catalog import make_policy
from agents.policy import Policy
from arena.agent_status import AgentStatus
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from arena.engine.records import MatchRecord
from arena.ladder.recorder import MatchRecorder, record_unrated
from arena.ladder.registration import ladder_rating_env
from arena.snapshots.cache import SnapshotCache
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from envs.errors import Conflict, InvalidParameter, UnknownAgent
from envs.registry import get_spec
from envs.spec import EnvSpec

log = logging.getLogger(__name__)



def _check_agents(spec: EnvSpec, agents: dict[int, repo.AgentInfo], ids: list[int], rated: bool) -> None:
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


def _policies(snapshots: SnapshotCache, spec: EnvSpec, lineup: list[repo.AgentInfo]) -> dict[str, Policy]:
    policies: dict[str, Policy] = {}
    for team, agent in enumerate(lineup):
        if agent.kind == "neural":
            if agent.snapshot_sha256 is None:
                raise Conflict(f"agent {agent.id} has no stored weights")
            policy = snapshots.get(agent.snapshot_sha256)
            # The agent's own role: weights shared by a hider and a seeker keep the spec
            # of their first submission.
            plays = agent.role or policy.spec.role
        elif agent.key.startswith("file:"):
            raise InvalidParameter(f"agent {agent.id} is a server-side file agent; it cannot be challenged")
        else:
            policy, plays = make_policy(agent.key, spec.env_id), agent.role
        role = spec.roles[team]
        if plays not in (None, role):
            raise InvalidParameter(
                f"agent {agent.id} plays role {plays!r}, but team {team} of "
                f"{spec.env_id} is {role!r}; list the agents in role order {list(spec.roles)}"
            )
        policies[agent.key] = policy
    return policies


def _record(sessions: Sessions, spec: EnvSpec, records: list[MatchRecord],
            agent_ids: dict[str, int], rated: bool) -> None:
    if rated:
        with sessions() as session:
            rating_env = ladder_rating_env(session, spec.env_id)
        MatchRecorder(sessions, spec, rating_env).record(records, agent_ids)
    else:
        record_unrated(sessions, spec, records, agent_ids)


def play_challenge(sessions: Sessions, snapshots: SnapshotCache, user: str, env_id: str,
                   agent_ids: list[int], matches: int, rated: bool) -> list[repo.StoredMatch]:
    """Play ``matches`` between ``agent_ids`` (one per team) now, record and return them.

    Args:
        sessions: The database.
        snapshots: Where neural agents' policies come from (a bounded cache).
        user: Who asked (for the log).

    Raises:
        UnknownEnv / UnknownAgent: Unknown env or agent id.
        InvalidParameter: Wrong number of agents, an agent of another env or role.
        Conflict: An agent is retired/rejected, or not yet placed for a rated challenge.
    """
    spec = get_spec(env_id)
    if len(agent_ids) != spec.num_teams:
        raise InvalidParameter(
            f"{env_id} has {spec.num_teams} teams ({', '.join(spec.roles)}): "
            f"give exactly {spec.num_teams} agent ids, one per team"
        )
    with sessions() as session:
        agents = repo.get_agents(session, agent_ids)
    _check_agents(spec, agents, agent_ids, rated)
    lineup = [agents[i] for i in agent_ids]
    policies = _policies(snapshots, spec, lineup)
    jobs = plan_matches([a.key for a in lineup], spec, matches, seed=secrets.randbits(62))
    records = play_matches(env_id, jobs, policies)
    _record(sessions, spec, records, {a.key: a.id for a in lineup}, rated)
    log.info("%s played %d %s challenge match(es) on %s between %s", user, len(records),
             "rated" if rated else "unrated", env_id, agent_ids)
    with sessions() as session:
        return repo.get_matches(session, [r.match_id for r in records])
