"""ORM models: the tables of the arena database.

The match log (``matches`` + ``match_participants``) is the source of truth;
``ratings`` and ``rating_events`` are derived from it and can be rebuilt by replaying
matches in ``seq`` order. Enumerations are ``VARCHAR`` + ``CHECK`` rather than
PostgreSQL enum types so that adding a value is a one-line, portable migration.

Keep :mod:`arena.storage.db.migrations` in step with this module: ``tests/storage/db`` compares the
migrated schema with these models on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from arena.core.agent_status import AgentStatus
from arena.storage.db.base import Base, BigSerial, RatingColumns, UTCDateTime, created_at_column, one_of, utcnow

AGENT_KINDS = ("builtin", "neural", "connected", "human")
AGENT_STATUSES = tuple(s.value for s in AgentStatus)
RESULTS = ("W", "D", "L")

ENV_ID = String(64)
SHA256 = String(64)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    is_admin: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = created_at_column()
    # The argon2id hash of the password for signing in on the site (arena.api.passwords);
    # None: a user made through the API who signs in with a token only.
    password_hash: Mapped[str | None] = mapped_column(String(255))


class WebSession(Base):
    """A signed-in browser: the sha256 hex of the random id its cookie carries, until ``expires_at``."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    session_hash: Mapped[str] = mapped_column(SHA256, unique=True)
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class ApiToken(Base):
    """An API token, stored only as the sha256 hex of the token string."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(SHA256, unique=True)
    created_at: Mapped[datetime] = created_at_column()
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Env(Base):
    __tablename__ = "envs"

    id: Mapped[str] = mapped_column(ENV_ID, primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON())
    # The TrueSkill constants of the env's ladder (league.ratings.rating.RatingEnv.to_json):
    # live ratings and a rebuild from the match log both use these.
    rating: Mapped[dict[str, Any] | None] = mapped_column(JSON())
    created_at: Mapped[datetime] = created_at_column()


class League(Base):
    __tablename__ = "leagues"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON())
    created_at: Mapped[datetime] = created_at_column()


class Snapshot(Base):
    """Frozen weights, keyed by the sha256 of their bytes (the neural agent's identity)."""

    __tablename__ = "snapshots"

    sha256: Mapped[str] = mapped_column(SHA256, primary_key=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"), index=True)
    league_id: Mapped[int | None] = mapped_column(
        ForeignKey("leagues.id", ondelete="SET NULL"), index=True
    )
    parent_sha256: Mapped[str | None] = mapped_column(
        ForeignKey("snapshots.sha256", ondelete="SET NULL")
    )
    spec: Mapped[dict[str, Any]] = mapped_column(JSON())
    size_bytes: Mapped[int] = mapped_column(BigInteger())
    # Deferred: listing snapshots must never drag megabytes of weights along.
    weights: Mapped[bytes | None] = mapped_column(LargeBinary(), deferred=True)
    created_at: Mapped[datetime] = created_at_column()


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("env_id", "key"),
        CheckConstraint(one_of("kind", AGENT_KINDS), name="kind"),
        CheckConstraint(one_of("status", AGENT_STATUSES), name="status"),
        Index("ix_agents_env_id_status", "env_id", "status"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(200))
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    name: Mapped[str] = mapped_column(String(200))
    owner_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    status_reason: Mapped[str] = mapped_column(Text(), default="", server_default="")
    snapshot_sha256: Mapped[str | None] = mapped_column(ForeignKey("snapshots.sha256"))
    # The role it plays for its whole team (hider, seeker, ...); NULL: every role of the env.
    role: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), default=utcnow, onupdate=utcnow, server_default=func.current_timestamp()
    )
    # Anyone may download its weights and spec (migration 0009_published); else only its owner and admins.
    published: Mapped[bool] = mapped_column(default=False, server_default=false())


class Match(Base):
    """One played match: the record needed to audit and replay it.

    ``seq`` is the monotonic sequence number (ratings are rebuilt in ``seq`` order);
    ``id`` is the UUID assigned before dispatch, unique so a result lands once.
    """

    __tablename__ = "matches"
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    league_id: Mapped[int | None] = mapped_column(ForeignKey("leagues.id", ondelete="SET NULL"))
    seed: Mapped[int] = mapped_column(BigInteger())
    seats: Mapped[list[Any]] = mapped_column(JSON())
    weights: Mapped[list[Any]] = mapped_column(JSON())
    actions: Mapped[list[Any]] = mapped_column(JSON())
    scores: Mapped[list[Any]] = mapped_column(JSON())
    winner: Mapped[int | None]
    termination: Mapped[str] = mapped_column(String(32))
    forfeit_seat: Mapped[int | None]
    detail: Mapped[str] = mapped_column(Text(), default="", server_default="")
    rated: Mapped[bool] = mapped_column(default=True, server_default=true())
    created_at: Mapped[datetime] = created_at_column()
    # Replay retention (migration 0006_retention): opened once, kept; dropped: ``actions`` emptied.
    replay_requested: Mapped[bool] = mapped_column(default=False, server_default=false())
    replay_dropped: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The board that rates it when that is not the env's ladder (migration 0011_competitions):
    # ``competition:<id>`` (a season), ``competition:<id>:final``; such a match has rated = false.
    board: Mapped[str | None] = mapped_column(String(64))


class MatchParticipant(Base):
    """One seat of one match, denormalised for per-agent history and stats."""

    __tablename__ = "match_participants"
    __table_args__ = (
        CheckConstraint(one_of("result", RESULTS), name="result"),
    )

    match_seq: Mapped[int] = mapped_column(
        BigInteger(), ForeignKey("matches.seq", ondelete="CASCADE"), primary_key=True
    )
    seat: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id"))
    team: Mapped[int]
    role: Mapped[str] = mapped_column(String(32))
    score: Mapped[float] = mapped_column(Float())
    result: Mapped[str] = mapped_column(String(1))


class AgentRating(RatingColumns, Base):
    """An agent's current rating in one role (derived from the match log)."""

    __tablename__ = "ratings"
    agent_id: Mapped[int] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )


class RatingEvent(Base):
    """How one match moved one agent's rating in one role."""

    __tablename__ = "rating_events"
    __table_args__ = (
        Index("ix_rating_events_agent_id_match_seq", "agent_id", "match_seq"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigSerial, primary_key=True, autoincrement=True)
    match_seq: Mapped[int] = mapped_column(
        BigInteger(), ForeignKey("matches.seq", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(32))
    mu_before: Mapped[float] = mapped_column(Float())
    sigma_before: Mapped[float] = mapped_column(Float())
    mu_after: Mapped[float] = mapped_column(Float())
    sigma_after: Mapped[float] = mapped_column(Float())


# Descending indexes need the mapped columns, so they are declared after the classes.
# Each serves one newest-first or best-first query as a plain index range scan.
Index("ix_matches_env_id_seq", Match.env_id, Match.seq.desc())
Index("ix_matches_board_seq", Match.board, Match.seq)
Index("ix_match_participants_agent_id_match_seq", MatchParticipant.agent_id,
      MatchParticipant.match_seq.desc())
# agent_id breaks ties so leaderboard pages are stable.
Index("ix_ratings_env_id_role_conservative", AgentRating.env_id, AgentRating.role,
      AgentRating.conservative.desc(), AgentRating.agent_id)


class QueuedMatch(Base):
    """A match scheduled and possibly dispatched, not yet recorded (the persisted queue).

    A ladder writes its jobs here *before* dispatching them, and the recorder deletes
    them in the same transaction that records their results. Whatever is left after a
    crash, a SIGTERM or a failed round is re-dispatched with the same ids and seeds, so
    a match is played again at most and recorded exactly once.
    """

    __tablename__ = "match_queue"
    __table_args__ = (Index("ix_match_queue_env_id_batch_key", "env_id", "batch_key"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    league_id: Mapped[int | None] = mapped_column(ForeignKey("leagues.id", ondelete="SET NULL"))
    # Jobs dispatched together share a batch key (run id and batch number).
    batch_key: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column()
    seed: Mapped[int] = mapped_column(BigInteger())
    agents: Mapped[list[Any]] = mapped_column(JSON())
    created_at: Mapped[datetime] = created_at_column()


class LeagueGeneration(Base):
    """A training league's strategy timeline: one row per generation (derived data).

    ``phase_rates`` maps each strategy phase the env detects (``chasing``, ``fort``,
    ``ramp_use``, ...) to its rate over the generation's episodes, ``ratings`` each
    env role to the ``[mu, sigma]`` of the generation's snapshot, and ``first_matches``
    each phase that first happened in this generation to the recorded match where it did.
    ``exploiters`` lists, apart from the mains, each exploiter's entry of the generation
    (``role``, ``index``, ``score``, ``edge``, ``snapshot``: the key it was frozen as or null,
    ``reset``); empty for a league without exploiters (migration ``0015_exploiters``).
    Written by the trainer (:mod:`arena.training.phases`) from its saved timeline.
    """

    __tablename__ = "league_generations"

    league_id: Mapped[int] = mapped_column(ForeignKey("leagues.id", ondelete="CASCADE"), primary_key=True)
    generation: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    episodes: Mapped[int] = mapped_column(BigInteger())
    phase_rates: Mapped[dict[str, Any]] = mapped_column(JSON())
    ratings: Mapped[dict[str, Any]] = mapped_column(JSON())
    first_matches: Mapped[dict[str, Any]] = mapped_column(JSON())
    exploiters: Mapped[list[dict[str, Any]]] = mapped_column(JSON(), default=list, server_default="[]")
    updated_at: Mapped[datetime] = created_at_column()


PROBE_STATUSES = ("queued", "running", "done", "failed")


class Probe(Base):
    """An exploitability probe of one agent: a best response trained within a budget.

    Queued by the API or by the service for a newly rated agent, run in the background
    (:mod:`arena.evaluation.probes`); the result is the exploiter's win rate against
    the agent with its 95% interval, always shown with ``budget_env_steps``.
    """

    __tablename__ = "probes"
    __table_args__ = (
        CheckConstraint(one_of("status", PROBE_STATUSES), name="status"),
        Index("ix_probes_agent_id_id", "agent_id", "id"),
        Index("ix_probes_status_id", "status", "id"),
        # One probe of an agent at a budget that has not failed (migration 0012_one_probe).
        Index("uq_probes_agent_id_budget_env_steps", "agent_id", "budget_env_steps", unique=True,
              postgresql_where=text("status <> 'failed'"), sqlite_where=text("status <> 'failed'")),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    budget_env_steps: Mapped[int] = mapped_column(BigInteger())
    eval_games: Mapped[int] = mapped_column()
    seed: Mapped[int] = mapped_column(BigInteger())
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    requested_by: Mapped[str] = mapped_column(String(64), default="", server_default="")
    # Env steps trained so far (progress while running; the steps used once done).
    env_steps: Mapped[int] = mapped_column(BigInteger(), default=0, server_default="0")
    games: Mapped[int | None] = mapped_column()
    wins: Mapped[int | None] = mapped_column()
    draws: Mapped[int | None] = mapped_column()
    losses: Mapped[int | None] = mapped_column()
    win_rate: Mapped[float | None] = mapped_column(Float())
    ci_low: Mapped[float | None] = mapped_column(Float())
    ci_high: Mapped[float | None] = mapped_column(Float())
    error: Mapped[str] = mapped_column(Text(), default="", server_default="")
    created_at: Mapped[datetime] = created_at_column()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


# The competition and tournament tables, on the same metadata (modules of their own: this one is long enough).
from arena.storage.db import competition_models, tournament_models  # noqa: F401
