"""Engines and sessions for SQLite (development, tests) and PostgreSQL (service).

SQLite gets, on every new connection: WAL (readers never block the writer), foreign
keys (off by default in SQLite!), a busy timeout (wait for the write lock instead of
failing at once) and ``synchronous=NORMAL`` (durable at checkpoints, safe under WAL).

pysqlite's default transaction handling starts a transaction only before DML, so
SELECTs run outside it and SAVEPOINTs break. Following SQLAlchemy's documented recipe
we switch the driver to autocommit and emit ``BEGIN`` ourselves, which gives SQLite
the same transaction semantics as PostgreSQL (including transactional DDL, so a
failed migration rolls back).

:class:`Sessions` is the one way to the database: ``sessions()`` is a session for reads
(concurrent: WAL readers never wait), ``sessions.write_transaction(work)`` runs
``work(session)`` as one write transaction that cannot fail because someone else is
writing. On SQLite it begins ``IMMEDIATE`` (the write lock is taken up front, waiting
up to the busy timeout, so a transaction that reads and then writes is never refused
half-way when another writer commits in between: that refusal, SQLITE_BUSY_SNAPSHOT,
skips the busy handler); on PostgreSQL serialization failures and deadlocks are
retried. Both go through the one retry policy (:mod:`arena.storage.retry`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from arena.storage.retry import retry, retry_transient

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_RETRY_S = 60.0
"""How long a write transaction is retried while other writers hold the database."""
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


class Sessions:
    """Sessions on one database: reads concurrent, writes whole and retried.

    Args:
        engine: The engine (:func:`make_engine`); :meth:`dispose` closes it.
        write_retry_s: How long :meth:`write_transaction` retries write conflicts.

    ``expire_on_commit=False``: repositories hand out plain values, and callers often
    read them after committing.
    """

    def __init__(self, engine: Engine, *, write_retry_s: float = WRITE_RETRY_S) -> None:
        self.engine = engine
        self.write_retry_s = write_retry_s
        self.is_sqlite = engine.dialect.name == "sqlite"
        writer = engine.execution_options(sqlite_begin="IMMEDIATE") if self.is_sqlite else engine
        self._read = sessionmaker(bind=engine, expire_on_commit=False)
        self._write = sessionmaker(bind=writer, expire_on_commit=False)

    def __call__(self) -> Session:
        """A session for reads (``with sessions() as session: ...``); it does not commit."""
        return self._read()

    @contextmanager
    def begin(self) -> Iterator[Session]:
        """One write transaction, committed on success, not retried.

        For tools and tests; service code uses :meth:`write_transaction`.
        """
        with self._write.begin() as session:
            yield session

    def write_transaction(self, work: Callable[[Session], T], *, what: str,
                          timeout_s: float | None = None, idempotent: bool = False) -> T:
        """``work(session)`` in one write transaction, committed; retried while others write.

        ``work`` may run more than once (each attempt in a fresh transaction, the
        previous one rolled back), so it must not have effects outside the session
        that a retry would repeat, unless they are harmless twice.

        Args:
            work: Reads and writes through the session it is given.
            what: What is being written, for logs and the final error.
            timeout_s: Give up after this long (default ``write_retry_s``).
            idempotent: Running ``work`` twice is harmless (recording by match id):
                then an unreachable database is waited out too.

        Raises:
            ServiceUnavailable: Other writers (or an outage) kept the database for ``timeout_s``.
            Whatever ``work`` raises otherwise (the transaction is rolled back).
        """
        def attempt() -> T:
            with self._write.begin() as session:
                return work(session)

        return retry_transient(attempt, timeout_s=self.write_retry_s if timeout_s is None else timeout_s,
                               what=what, idempotent=idempotent)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def session_factory(engine: Engine) -> Sessions:
    """The :class:`Sessions` of ``engine``."""
    return Sessions(engine)
