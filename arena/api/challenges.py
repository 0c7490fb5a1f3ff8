"""Challenges: a user asks two agents to play now; the server plays and records it.

The matches run in-process on :func:`arena.engine.play_matches` (guards, forfeits and
time budgets as everywhere else). Builtin agents are built by name; neural agents come
from the API's bounded snapshot cache. Rated challenges go through the ladder's
:class:`~arena.recorder.MatchRecorder` (exactly-once, ratings in the same
transaction); unrated ones are stored with ``rated = false`` plus their participants,
so they appear in the agents' match history but never move a rating.
"""

from __future__ import annotations

import logging
import secrets

from agents.catalog import make_policy
from agents.policy import Policy
from arena.api.deps import Principal
from arena.api.state import ApiState
from arena.db import repositories as repo
from arena.engine import play_matches
from arena.engine.records import MatchRecord
from arena.matchplan import plan_matches
from arena.recorder import MatchRecorder, participant_rows
from envs.errors import Conflict, InvalidParameter, UnknownAgent
from envs.registry import get_spec
from envs.spec import EnvSpec
from league.ratings import RatingEnv

log = logging.getLogger(__name__)

RATED_STATUSES = ("placement", "rated")
UNPLAYABLE = ("rejected", "retired")


def _check_agents(spec: EnvSpec, agents: dict[int, repo.AgentInfo], ids: list[int], rated: bool) -> None:
    unknown = [i for i in ids if i not in agents]
    if unknown:
        raise UnknownAgent(f"no agent with id {unknown[0]}")
    for agent_id in ids:
        agent = agents[agent_id]
        if agent.env_id != spec.env_id:
            raise InvalidParameter(f"agent {agent_id} plays {agent.env_id}, not {spec.env_id}")
        if agent.status in UNPLAYABLE:
            raise Conflict(f"agent {agent_id} is {agent.status} and plays no more matches")
        if rated and agent.status not in RATED_STATUSES:
            raise Conflict(
                f"agent {agent_id} is {agent.status}; rated challenges need agents in "
                f"placement or rated (or ask for an unrated challenge)"
            )


def _policies(state: ApiState, spec: EnvSpec, lineup: list[repo.AgentInfo]) -> dict[str, Policy]:
    policies: dict[str, Policy] = {}
    for team, agent in enumerate(lineup):
        if agent.kind == "neural":
            if agent.snapshot_sha256 is None:
                raise Conflict(f"agent {agent.id} has no stored weights")
            policy = state.policies.get(agent.snapshot_sha256)
            role = spec.roles[team]
            if policy.spec.role != role:
                raise InvalidParameter(
                    f"agent {agent.id} plays role {policy.spec.role!r}, but team {team} of "
                    f"{spec.env_id} is {role!r}; list the agents in role order {list(spec.roles)}"
                )
        elif agent.key.startswith("file:"):
            raise InvalidParameter(f"agent {agent.id} is a server-side file agent; it cannot be challenged")
        else:
            policy = make_policy(agent.key, spec.env_id)
        policies[agent.key] = policy
    return policies


def _record(state: ApiState, spec: EnvSpec, records: list[MatchRecord],
            agent_ids: dict[str, int], rated: bool) -> None:
    sessions = state.services.sessions
    if rated:
        MatchRecorder(sessions, spec, RatingEnv()).record(records, agent_ids)
        return
    with sessions.begin() as session:
        new = repo.insert_matches(session, [repo.match_row(r, rated=False) for r in records])
        rows = [row for r in records if r.match_id in new
                for row in participant_rows(spec, r, new[r.match_id], agent_ids)]
        repo.insert_participants(session, rows)


def play_challenge(state: ApiState, user: Principal, env_id: str, agent_ids: list[int],
                   matches: int, rated: bool) -> list[repo.StoredMatch]:
    """Play ``matches`` between ``agent_ids`` (one per team) now, record and return them.

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
    with state.services.sessions() as session:
        agents = repo.get_agents(session, agent_ids)
    _check_agents(spec, agents, agent_ids, rated)
    lineup = [agents[i] for i in agent_ids]
    policies = _policies(state, spec, lineup)
    jobs = plan_matches([a.key for a in lineup], spec, matches, seed=secrets.randbits(62))
    records = play_matches(env_id, jobs, policies)
    _record(state, spec, records, {a.key: a.id for a in lineup}, rated)
    log.info("%s played %d %s challenge match(es) on %s between %s", user.name, len(records),
             "rated" if rated else "unrated", env_id, agent_ids)
    with state.services.sessions() as session:
        return repo.get_matches(session, [r.match_id for r in records])
