"""Service settings, read from ``ARENA_*`` environment variables (pydantic-settings).

Every field has a default that works on a fresh machine::

    ARENA_DATA_DIR            ./.arena (made absolute at load time)
    ARENA_DATABASE_URL        sqlite:///<data_dir>/arena.db
    ARENA_REDIS_URL           unset: the app starts an embedded Redis-compatible server
                              persisted under <data_dir>/redis/
    ARENA_RAY_ADDRESS         unset: a local ``ray.init`` sized to this machine
    ARENA_RAY_GPUS_PER_WORKER unset: the cluster's GPUs shared by the match workers (none
                              without GPUs); 0: CPU workers; 0.25: four workers per GPU
    ARENA_MAX_UPLOAD_BYTES    64 MiB
    ARENA_SNAPSHOT_CACHE_SIZE 32 policies per worker
    ARENA_ONNX_CONFINEMENT    unset: required where the kernel has seccomp and network namespaces,
                              else best-effort (docs/onnx.md); required: no ONNX model runs in a
                              worker that lacks a layer
    ARENA_ADMIN_TOKEN         unset: admin endpoints disabled
    ARENA_PROBE_AUTO          true: probe every newly rated submission once
    ARENA_PROBE_BUDGET_STEPS  100000 env steps per exploitability probe
    ARENA_PROBE_EVAL_GAMES    400 evaluation games per probe
    ARENA_PROBE_CONCURRENCY   1 probe at a time (each one process, one torch thread)
    ARENA_PROBE_NICENESS      10: probes run this much below the service's CPU priority
    ARENA_PROBE_QUEUE_SIZE    100 probes queued or running at most
    ARENA_PROBE_BACKEND       auto (Ray when the service runs on Ray, else a process)
    ARENA_PROBES_QUEUED_PER_USER  3 probes one user may have queued or running at once
    ARENA_PROBES_PER_USER_PER_DAY 20 probes one user may ask for per UTC day
    ARENA_LOG_FORMAT          text (json: one object per line, with match/agent ids)
    ARENA_LOG_LEVEL           INFO
    ARENA_HOST / ARENA_PORT   127.0.0.1 / 8000
    ARENA_ENVS                unset: a ladder for every built-in env; else a comma list of
                              env ids, ``id=pkg.module:factory`` registers a third-party env
    ARENA_SUBMISSIONS_PER_DAY         5 agents per user per env per UTC day
    ARENA_SIGNUPS_PER_HOUR            30 sign-ups per client address
    ARENA_WRITES_PER_MINUTE           60 writes per user
    ARENA_CLIENT_WRITES_PER_MINUTE    600 writes per client address
    ARENA_CHALLENGE_MATCHES_PER_HOUR  2000 challenge matches per user
    ARENA_CHALLENGES_IN_FLIGHT        2 challenges per user queued or playing at a time
    ARENA_CONNECTED_PER_USER          16 live connected-agent sockets per user (counted across API processes)
    ARENA_CONNECTED_SOCKETS_PER_ADDRESS  64 open agent sockets per client address (across API processes)
    ARENA_CONNECTED_IDLE_S            60 s: a connected client that sends nothing this long is closed (4408)
    (a limit of 0 turns it off; the admin token is never limited)
    ARENA_CONNECTED_SLOT_TTL_S        30 s: a dead API process's sockets stop counting against the limits after this
    ARENA_WORK_STALE_S                30 s: a person's game, challenge or tournament game claimed by a service
                                      that died is queued again after this long without a heartbeat
    ARENA_TRICKLE_MATCHES_PER_S  0 rated matches/s per env once its board has settled (drift checks only)
    ARENA_LADDER_SETTLE       true (false: ladders play flat out forever, the old way)
    ARENA_REPLAY_RETENTION_DAYS  30 (action lists of older matches nobody kept dropped; 0 keeps all)

There is no module-level settings object: :func:`get_settings` builds one from the
environment and memoizes it; tests call ``get_settings.cache_clear()`` after changing
the environment, or construct ``Settings(...)`` directly.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)

__all__ = ["Settings", "get_settings", "ray_init_kwargs", "resolved_database_url"]

_SQLITE_PREFIX = "sqlite:///"


class Settings(BaseSettings):
    """Arena service configuration (environment prefix ``ARENA_``)."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", extra="ignore", frozen=True)

    data_dir: Path = Field(
        default=Path(".arena"),
        description="Root of everything the service writes; resolved to an absolute path.",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL; empty means the SQLite file <data_dir>/arena.storage.db.",
    )
    redis_url: str | None = Field(
        default=None,
        description="redis:// URL of an external server; unset starts the embedded server.",
    )
    ray_address: str | None = Field(
        default=None,
        description="Address of a running Ray cluster; unset starts a local one.",
    )
    ray_object_store_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=100 * 1024 * 1024,
        description="Object store size of the local Ray instance (ignored with ray_address).",
    )
    ray_gpus_per_worker: float | None = Field(
        default=None,
        ge=0.0,
        description="GPU share each Ray match worker requests; unset: the cluster's GPUs shared "
        "evenly (at most one each, none on a cluster without GPUs); 0: CPU workers. A worker "
        "given a GPU plays on CPU, and says so, where CUDA is unavailable.",
    )
    max_upload_bytes: int = Field(
        default=64 * 1024 * 1024, gt=0, description="Largest accepted weights upload."
    )
    onnx_probe_limit_s: float = Field(
        default=5.0, gt=0.0, le=60.0,
        description="Deadline of each probe run of a submitted ONNX model (validation).",
    )
    onnx_confinement: Literal["required", "best-effort"] | None = Field(
        default=None,
        description="ONNX workers: 'required' runs no model in a worker that lacks a confinement layer "
        "(network namespace, not root, seccomp, rlimits); 'best-effort' runs with what the kernel "
        "allowed. Unset: required where the kernel has seccomp and network namespaces. Every process "
        "that starts workers reads the same variable (agents.onnx_agents.confine.resolve_mode).",
    )
    snapshot_cache_size: int = Field(
        default=32, ge=1, description="Loaded policies each worker keeps (LRU)."
    )
    page_cache_s: float = Field(
        default=0.5, ge=0.0, le=60.0,
        description="Seconds a served leaderboard or newest match-history page may be reused "
        "(0: always fresh).",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="Service logs: text for people, json (one object per line) for pipelines."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Lowest level the service logs."
    )
    admin_token: SecretStr | None = Field(
        default=None, description="Bearer token for admin endpoints; unset disables them."
    )
    envs: str = Field(
        default="",
        description="Envs with a rated ladder, comma separated: registered ids, or "
        "id=pkg.module:factory to register a third-party PettingZoo env by import path; "
        "empty: every built-in env.",
    )
    submissions_per_day: int = Field(
        default=5, ge=0, description="Agents a user may submit per env per UTC day (0: no quota)."
    )
    signups_per_hour: int = Field(default=30, ge=0, description="Sign-ups per client address per hour (0: off).")
    writes_per_minute: int = Field(
        default=60, ge=0, description="Write requests (submit, challenge, retire) per user per minute (0: off)."
    )
    client_writes_per_minute: int = Field(
        default=600, ge=0, description="Write requests, sign-ups included, per client address per minute (0: off)."
    )
    challenge_matches_per_hour: int = Field(
        default=2000, ge=0, description="Challenge matches a user may ask for per hour (0: off)."
    )
    challenges_in_flight: int = Field(
        default=2, ge=0, description="Challenges of one user queued or being played at the same time (0: off)."
    )
    connected_per_user: int = Field(
        default=16, ge=1, description="Live connected-agent connections one user may hold (counted in Redis, across "
        "every API process)."
    )
    connected_sockets_per_address: int = Field(
        default=64, ge=1, description="Open agent WebSockets, authenticated or not, per client address "
        "(counted in Redis, across every API process)."
    )
    connected_idle_s: float = Field(
        default=60.0, gt=0.0, le=3600.0, description="Seconds a connected-agent client may send nothing (not "
        "even a ping) before its socket is closed with 4408 (clients ping every 20 s)."
    )
    connected_send_timeout_s: float = Field(
        default=5.0, gt=0.0, le=60.0, description="Seconds one frame to a connected-agent client may wait for room "
        "in its socket's buffers: past this a client that stopped reading is closed (4408), what it held given back."
    )
    connected_slot_ttl_s: float = Field(
        default=30.0, ge=5.0, le=3600.0, description="Seconds a socket's slot counts unless its API process renews "
        "it (every 2 s): the sockets of a process that died stop counting against the limits after this."
    )
    work_stale_s: float = Field(
        default=30.0, ge=3.0, le=3600.0, description="Seconds a claimed person's game, challenge or tournament game "
        "may go without its service's heartbeat before it is queued again (the service died). Heartbeats and "
        "sweeps run at a sixth and a third of it, at most every 5 and 10 s."
    )
    probe_auto: bool = Field(
        default=True, description="Queue an exploitability probe for every submitted agent once it is rated."
    )
    probe_budget_steps: int = Field(
        default=100_000, ge=0, le=50_000_000,
        description="Env steps the exploiter of a probe trains for (shown with every probe result).",
    )
    probe_eval_games: int = Field(
        default=400, ge=2, le=100_000, description="Evaluation games of a probe after its training."
    )
    probe_concurrency: int = Field(
        default=1, ge=0, le=64,
        description="Probes run at once (0: none run; each uses one CPU and one torch thread).",
    )
    probe_niceness: int = Field(
        default=10, ge=0, le=19,
        description="How far below the service's CPU priority probes run (a nice increment): on a busy "
        "machine the ladder wins the CPU. 0: the same priority, for a machine that runs nothing else.",
    )
    probe_queue_size: int = Field(
        default=100, ge=1, description="Probes queued or running at most; further requests are refused."
    )
    probe_backend: Literal["auto", "ray", "process"] = Field(
        default="auto",
        description="Where probes run: ray tasks, a spawned process each, or auto (ray when initialized).",
    )
    probes_queued_per_user: int = Field(
        default=3, ge=0,
        description="Probes one user may have queued or running at once (0: off; admins are never limited).",
    )
    probes_per_user_per_day: int = Field(
        default=20, ge=0, description="Probes one user may ask for per UTC day (0: off; admins never limited).",
    )
    trickle_matches_per_s: float = Field(
        default=0.0, ge=0.0,
        description="Rated matches per second per env once its board has settled (the maintenance "
        "trickle; see arena.ladder.pacing). 0: none, a settled board plays only its drift checks.",
    )
    ladder_settle: bool = Field(
        default=True,
        description="Let settled boards rest (only the trickle); false plays every ladder flat out forever.",
    )
    replay_retention_days: float = Field(
        default=30.0, ge=0.0,
        description="Drop the action lists of matches older than this, except those an owner of one of "
        "their agents opened with its token and those the site links (results and ratings are kept); "
        "0 keeps every replay.",
    )
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8000, ge=1, le=65535, description="HTTP port.")
    shutdown_grace_s: float = Field(
        default=10.0, gt=0.0, le=600.0, description="Seconds a stopping API process waits for its open connections "
        "(connected agents never close theirs) before it cancels their handlers and gives back what they held."
    )

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        # Absolute, so Ray workers (which run in their own working directory) and the
        # embedded Redis server (run with cwd=its data dir) see the same place.
        return value.expanduser().resolve()

    @field_validator("ray_gpus_per_worker")
    @classmethod
    def _ray_gpu_share(cls, value: float | None) -> float | None:
        # Ray accepts a fraction of one GPU or whole GPUs, nothing in between.
        if value is not None and value > 1 and not value.is_integer():
            raise ValueError(f"a worker takes a fraction of one GPU or whole GPUs, not {value}")
        return value

    @field_validator("redis_url", "ray_address", "ray_gpus_per_worker", "admin_token", "onnx_confinement",
                     mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # ``ARENA_REDIS_URL=`` in a .env or compose file means "not set", not "".
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _default_database_url(self) -> Settings:
        if not self.database_url:
            # frozen model: the default derives from another field, so it is set once here.
            object.__setattr__(
                self, "database_url", f"{_SQLITE_PREFIX}{self.data_dir / 'arena.db'}"
            )
        return self

    @property
    def redis_dir(self) -> Path:
        """Where the embedded Redis server keeps its AOF/RDB files."""
        return self.data_dir / "redis"

    @property
    def snapshot_dir(self) -> Path:
        """Root of the durable copies of snapshot weights (see :mod:`arena.snapshots.durable`)."""
        return self.data_dir / "snapshots"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process, read once from the environment.

    Returns:
        A frozen :class:`Settings`; call ``get_settings.cache_clear()`` to re-read.
    """
    return Settings()


def resolved_database_url(settings: Settings) -> str:
    """The database URL, with the data directory (and a SQLite file's folder) created.

    Args:
        settings: The service settings.

    Returns:
        ``settings.database_url`` unchanged; creating directories is the side effect.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url = settings.database_url
    if url.startswith(_SQLITE_PREFIX):
        path = url.removeprefix(_SQLITE_PREFIX).split("?", 1)[0]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    return url


def ray_init_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``ray.init`` (Ray itself is imported only where it is used).

    Args:
        settings: The service settings.

    Returns:
        ``{"address": ...}`` for an existing cluster; otherwise a local instance using
        every CPU of this machine, no dashboard and ``settings.ray_object_store_bytes``.
    """
    if settings.ray_address:
        return {"address": settings.ray_address}
    return {
        "num_cpus": os.cpu_count() or 1,
        "include_dashboard": False,
        "object_store_memory": settings.ray_object_store_bytes,
    }
