"""How envs and agents enter a ladder: the one way to register each.

* :func:`register_env` stores an env once, with the TrueSkill constants of its ladder;
  every rating of the env (live, rebuilt, shown) is computed with the stored ones
  (:func:`ladder_rating_env`), so ``arena ratings rebuild`` replays the match log with
  the constants the ladder used.
* :func:`register_builtin_agents` adds scripted agents (always valid: they go straight
  to placement).
* :func:`register_snapshot_agent` turns weights into a neural agent: snapshot row, agent
  row and the weights in the snapshot pool, in one transaction (submissions, league
  snapshots, demo agents and ``arena ladder run file:...`` all come through here).
* :func:`register_connected_agent` adds an agent without weights that its owner's process
  plays over the connected-agent protocol (or a person in the browser: kind ``human``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from agents.checkpoint_spec import CheckpointSpec
from agents.role_baselines import baseline_role
from arena.core.agent_status import AgentStatus
from arena.storage.db import repositories as repo
from envs.errors import InvalidSubmission
from envs.registry import builtin_env_ids, get_spec
from envs.registry import register_env as register_env_by_path
from league.ratings.rating import RatingEnv

DEFAULT_RATING_ENV = RatingEnv()
"""The TrueSkill constants a new ladder starts with."""
QUEUED_REASON = "waiting for validation"
"""Why a new neural agent is ``queued`` (nothing stays queued without a reason)."""


class SnapshotSink(Protocol):
    """Where weights are kept for workers (:class:`~arena.snapshots.pool.RedisSnapshotPool`)."""

    def put(self, weights: bytes, spec: CheckpointSpec, pool: str,
            meta: Mapping[str, Any] | None = None) -> str:
        ...


@dataclass(frozen=True)
class RegisteredAgent:
    """A neural agent as stored: its id, ladder key and the sha256 of its weights."""

    id: int
    key: str
    sha256: str


def register_env(session: Session, env_id: str, rating_env: RatingEnv | None = None) -> RatingEnv:
    """Store ``env_id`` (if new) with its ladder's TrueSkill constants; return the stored ones.

    Args:
        rating_env: Constants for a new ladder (default :data:`DEFAULT_RATING_ENV`); an
            env already stored keeps the constants it has.
    """
    repo.ensure_env(session, get_spec(env_id), (rating_env or DEFAULT_RATING_ENV).to_json())
    return ladder_rating_env(session, env_id)


@functools.lru_cache(maxsize=8)
def ladder_envs(setting: str) -> tuple[str, ...]:
    """The envs whose ladders the service runs, from ``ARENA_ENVS``.

    Args:
        setting: Comma-separated entries: a registered env id (``hide_and_seek-v0``), or
            ``id=pkg.module:factory`` to register a third-party PettingZoo env by import
            path first (its spec inferred: every agent a seat, its own team, role
            ``player``). Empty: every built-in env.

    Registers each third-party env once per process (the result is cached).

    Raises:
        UnknownEnv: An id that is not registered (the message lists the registered ones).
        ValueError: A malformed id or import path.
    """
    entries = [e.strip() for e in setting.split(",") if e.strip()]
    if not entries:
        return builtin_env_ids()
    ids = []
    for entry in entries:
        env_id, sep, path = (part.strip() for part in entry.partition("="))
        if sep:
            register_env_by_path(env_id, path)
        get_spec(env_id)
        ids.append(env_id)
    return tuple(dict.fromkeys(ids))


def ladder_rating_env(session: Session, env_id: str) -> RatingEnv:
    """The TrueSkill constants of ``env_id``'s ladder (the defaults before it is registered)."""
    stored = repo.get_env_rating(session, env_id)
    return RatingEnv.from_json(stored) if stored else DEFAULT_RATING_ENV


def register_builtin_agents(session: Session, env_id: str, keys: Iterable[str]) -> dict[str, int]:
    """Scripted agents by builtin name (``heuristic:epsilon=0.3``); ``{key: id}``.

    A baseline made for one role (``chaser`` seeks) plays only that role
    (:func:`agents.role_baselines.baseline_role`); the others play every role.
    """
    register_env(session, env_id)
    keys = list(keys)
    roles = {k: baseline_role(env_id, k) for k in keys}
    return repo.get_or_create_agents(session, env_id, keys, "builtin", status=AgentStatus.PLACEMENT,
                                     roles=roles)


def snapshot_agent_key(arch: str, sha256: str, env_id: str | None = None, role: str | None = None) -> str:
    """The ladder key of a neural agent: its architecture and the start of its weights' hash.

    In an env with several roles the key also names the role (``mlp-0123...@seeker``):
    the same weights may be submitted once per role and are rated per role.
    """
    key = f"{arch}-{sha256[:16]}"
    if env_id is not None and role is not None and len(set(get_spec(env_id).roles)) > 1:
        key = f"{key}@{role}"
    return key


def register_snapshot_agent(
    session: Session,
    pool: SnapshotSink,
    weights: bytes,
    spec: CheckpointSpec,
    *,
    pool_name: str,
    name: str,
    owner_id: int | None = None,
    status: AgentStatus = AgentStatus.QUEUED,
    reason: str | None = None,
    league_id: int | None = None,
    parent_sha256: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> RegisteredAgent:
    """Store ``weights`` as a neural agent of ``spec.env`` (idempotent for the same weights).

    The snapshot and agent rows are written first and the weights go to the pool last,
    inside the caller's transaction: if the pool fails, the transaction rolls back and
    no row refers to missing weights.

    Args:
        session: The caller's transaction.
        pool: The snapshot pool workers load weights from.
        weights: safetensors bytes, already validated against ``spec``.
        pool_name: The pool's name (``submissions.<env>``, ``league.<name>.<env>``).
        name: Display name of a new agent.
        owner_id: The submitting user, if any.
        status: Status of a new agent (``queued``: the service validates it first).
        reason: Status reason of a new agent (default for ``queued``: :data:`QUEUED_REASON`).
        league_id, parent_sha256: Lineage of a league snapshot.
        meta: Extra snapshot metadata kept in the pool.
    """
    sha = hashlib.sha256(weights).hexdigest()
    key = snapshot_agent_key(spec.arch, sha, spec.env, spec.role)
    if reason is None:
        reason = QUEUED_REASON if status == AgentStatus.QUEUED else ""
    register_env(session, spec.env)
    repo.put_snapshot(session, sha, env_id=spec.env, spec=spec.to_json(), size_bytes=len(weights),
                      league_id=league_id, parent_sha256=parent_sha256)
    ids = repo.get_or_create_agents(session, spec.env, [key], "neural", names={key: name},
                                    owner_id=owner_id, status=status, snapshot_sha256=sha,
                                    roles={key: spec.role}, reason=reason)
    pool.put(weights, spec, pool=pool_name, meta={"agent_key": key, **(meta or {})})
    return RegisteredAgent(ids[key], key, sha)


def connected_agent_key(kind: str, owner_id: int | None, name: str, env_id: str, role: str | None) -> str:
    """The ladder key of a connected (or human) agent: its owner and name, hashed.

    The same owner registering the same name (and role) gets the same key, so
    ``arena connect`` reuses the agent it made the first time.
    """
    digest = hashlib.sha256(f"{owner_id}\0{name}".encode()).hexdigest()[:16]
    key = f"{kind}-{digest}"
    if role is not None and len(set(get_spec(env_id).roles)) > 1:
        key = f"{key}@{role}"
    return key


def register_connected_agent(session: Session, env_id: str, name: str, owner_id: int | None,
                             role: str | None, kind: str = "connected") -> tuple[repo.AgentInfo, bool]:
    """A connected (or ``human``) agent of ``owner_id`` called ``name``; ``(agent, created)``.

    It has no weights and needs no validation episodes: it enters ``placement`` at once
    and plays whenever its client is connected (a forfeit costs it the match).
    """
    spec = get_spec(env_id)
    if role is not None and role not in spec.roles:
        raise InvalidSubmission(f"{env_id} has no role {role!r}; its roles: {', '.join(dict.fromkeys(spec.roles))}")
    if role is None and len(set(spec.roles)) > 1:
        raise InvalidSubmission(f"{env_id} has several roles ({', '.join(dict.fromkeys(spec.roles))}): "
                                "say which one this agent plays")
    if len(set(spec.roles)) == 1:
        role = None  # a symmetric env's one role: every agent plays it
    key = connected_agent_key(kind, owner_id, name, env_id, role)
    register_env(session, env_id)
    found = repo.get_agent_by_key(session, env_id, key)
    if found is not None:
        return found, False
    ids = repo.get_or_create_agents(session, env_id, [key], kind, names={key: name}, owner_id=owner_id,
                                    status=AgentStatus.PLACEMENT, roles={key: role},
                                    reason="offline: waiting for its client to connect")
    return repo.get_agent(session, ids[key]), True
