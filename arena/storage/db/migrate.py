"""Alembic, driven from Python: no ``alembic.ini`` needed in the working directory.

The migration scripts live inside the package (:mod:`arena.storage.db.migrations`), so an
installed Arena can bring any database to the current schema with
``upgrade(url)``. For generating new revisions during development, point Alembic at
them with :func:`alembic_config` (see ``arena/storage/db/migrations/README``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from arena.storage.db.connection import make_engine

# pg_advisory_xact_lock key serialising concurrent upgrade() calls ("arena.mg").
MIGRATION_LOCK = int.from_bytes(b"arena.mg", "big") >> 1
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    """An Alembic config pointing at Arena's migration scripts (no ini file)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrates the database at ``url`` to ``revision`` (default: the latest).

    Runs in one transaction on both backends (SQLite and PostgreSQL both have
    transactional DDL), so a failing migration leaves the schema unchanged. A database
    already at the latest revision (every start but the first) is only read: one query,
    not Alembic's load of every revision script (about 25 ms).

    Args:
        url: SQLAlchemy database URL.
        revision: Target revision id, or ``"head"``.
    """
    if revision == "head" and current_revision(url) == head_revision():
        return
    _run(url, lambda config: command.upgrade(config, revision))


def downgrade(url: str, revision: str) -> None:
    """Migrates the database at ``url`` down to ``revision`` (``"base"``: empty)."""
    _run(url, lambda config: command.downgrade(config, revision))


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (``None`` if never migrated)."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


@cache
def head_revision() -> str:
    """The newest revision shipped with this version of Arena (read once per process: the
    scripts are part of the installed package)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "arena.storage.db.migrations has no revisions"
    return head


def _run(url: str, action: Callable[[Config], None]) -> None:
    # The connection travels in ``attributes``, not as a URL through the ini parser:
    # ``%`` in a URL (e.g. an encoded search_path option) breaks its interpolation.
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            # Services call upgrade() on every start, possibly several at once: the
            # first migrates while the others wait, then find the schema at head.
            connection.execution_options(sqlite_begin="IMMEDIATE")
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                    )
                config = alembic_config()
                config.attributes["connection"] = connection
                action(config)
    finally:
        engine.dispose()
