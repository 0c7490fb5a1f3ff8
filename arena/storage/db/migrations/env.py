"""Alembic environment for Arena.

Normally run through :func:`arena.storage.db.migrate.upgrade`, which hands over an open
connection in ``config.attributes["connection"]``. Run by the ``alembic`` command
instead, it reads ``sqlalchemy.url`` from the config (or ``ARENA_DATABASE_URL``).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

from arena.storage.db import models  # noqa: F401  (registers every table on the metadata)
from arena.storage.db.base import Base
from arena.storage.db.connection import make_engine

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table.
        render_as_batch=True,
        **kwargs,
    )


def _run_on(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("ARENA_DATABASE_URL")
    if not url:
        raise RuntimeError("set sqlalchemy.url or ARENA_DATABASE_URL to run migrations")
    return url


if context.is_offline_mode():
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif (connection := config.attributes.get("connection")) is not None:
    _run_on(connection)
else:
    engine = make_engine(_url())
    try:
        with engine.begin() as conn:
            _run_on(conn)
    finally:
        engine.dispose()
