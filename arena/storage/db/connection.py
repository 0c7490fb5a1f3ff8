"""Engines and sessions for SQLite (development, tests) and PostgreSQL (service).

SQLite gets, on every new connection: WAL (readers never block the writer), foreign
keys (off by default in SQLite!), a busy timeout (wait for the write lock instead of
failing at once) and ``synchronous=NORMAL`` (durable at checkpoints, safe under WAL).

pysqlite's default transaction handling starts a transaction only before DML, so
SELECTs run outside it and SAVEPOINTs break. Following SQLAlchemy's documented recipe
we switch the driver to autocommit and emit ``BEGIN`` ourselves, which gives SQLite
the same transaction semantics as PostgreSQL (including transactional DDL, so a
failed migration rolls back).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from arena.storage.retry import retry

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_MIN_VERSION = (3, 35)  # RETURNING
SQLITE_BEGIN_MODES = ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")

# Compact JSON; NaN/inf are refused here rather than by PostgreSQL (which rejects
# them as invalid JSON) so both backends fail the same way.
# One encoder for every call (json.dumps would build one per call: a fifth of the cost
# of encoding a match's small JSON columns).
dump_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def make_engine(url: str, *, echo: bool = False, **kwargs: Any) -> Engine:
    """Creates an engine configured for Arena's workload.

    Args:
        url: SQLAlchemy URL, e.g. ``sqlite:///arena.db`` or
            ``postgresql+psycopg://user@host/db``.
        echo: Log every statement (debugging).
        **kwargs: Extra ``create_engine`` arguments; they override the defaults here.

    Returns:
        The engine. Dispose of it when done (``engine.dispose()``).
    """
    parsed = make_url(url)
    options: dict[str, Any] = {"echo": echo, "json_serializer": dump_json}
    is_sqlite = parsed.get_backend_name() == "sqlite"
    in_memory = is_sqlite and parsed.database in (None, "", ":memory:")
    if is_sqlite:
        if sqlite3.sqlite_version_info < SQLITE_MIN_VERSION:
            raise RuntimeError(
                f"Arena needs SQLite >= 3.35 (for RETURNING); this Python links "
                f"{sqlite3.sqlite_version}. Use a newer Python build or PostgreSQL."
            )
        if in_memory:
            # Each connection to :memory: is its own database: share one connection.
            options.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
        else:
            options.update(pool_size=5, max_overflow=5, pool_timeout=30)
    else:
        # pre_ping survives server restarts; recycle stays under typical idle timeouts.
        options.update(pool_size=5, max_overflow=10, pool_pre_ping=True, pool_recycle=1800)
    options.update(kwargs)
    engine = create_engine(parsed, **options)
    if is_sqlite:
        _configure_sqlite(engine, wal=not in_memory)
    return engine


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see module doc)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            if wal:
                _enable_wal(cursor)
                cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # ``conn.execution_options(sqlite_begin="IMMEDIATE")`` takes the write lock up
        # front: a transaction that reads and then writes cannot then fail with
        # SQLITE_BUSY when another writer committed in between.
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        if mode not in SQLITE_BEGIN_MODES:
            raise ValueError(f"sqlite_begin must be one of {SQLITE_BEGIN_MODES}, got {mode!r}")
        connection.exec_driver_sql(f"BEGIN {mode}")


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    """Switches the database file to WAL (a persistent setting), retrying while locked.

    Switching needs an exclusive lock and SQLite does not wait for it through the busy
    handler, so processes opening a brand-new database at the same moment (services
    starting together) would otherwise fail with "database is locked".
    """
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return

    def locked(error: BaseException) -> bool:
        return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)

    def give_up(error: BaseException) -> Exception:
        return error  # type: ignore[return-value]  # the driver's own "database is locked"

    retry(lambda: cursor.execute("PRAGMA journal_mode=WAL"), transient=locked,
          timeout_s=SQLITE_BUSY_TIMEOUT_MS / 1000, give_up=give_up, what="switching SQLite to WAL")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to ``engine``.

    ``expire_on_commit=False``: repositories hand out plain values, and callers often
    read them after committing.
    """
    return sessionmaker(bind=engine, expire_on_commit=False)
