"""Database fixtures: every test that asks for ``db_url`` runs on SQLite and PostgreSQL.

Import into ``tests/conftest.py`` with ``from tests.fixtures_db import *`` (or name all
of ``__all__``: ``db_url`` and ``migrated_db_url`` look fixtures up by name), or list
``"tests.fixtures_db"`` in ``pytest_plugins``.

* ``db_url`` - an EMPTY database private to one test: a fresh SQLite file, or a fresh
  PostgreSQL schema (selected through ``search_path`` in the URL's ``options``).
* ``migrated_db_url`` - the same, upgraded to the latest migration (on SQLite: a copy of
  ``migrated_sqlite_file``, a file migrated once per pytest process; on PostgreSQL: the
  statements of ``postgres_migration``, recorded once per pytest process, replayed).
* ``db_engine`` / ``db_session`` - an engine / a session on ``migrated_db_url``.

PostgreSQL: the server at ``ARENA_TEST_POSTGRES_URL`` (default: the ``postgres`` then
the ``root`` user at ``127.0.0.1:5432/test``, trust auth). Each pytest process (each
xdist worker) creates one uniquely named database, makes one schema per test in it,
and drops the database at the end of the session, so workers never collide and
nothing is left behind. The PostgreSQL cases carry the ``postgres`` marker and are
skipped, with the connection error as the reason, only if no server answers.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, make_url
from sqlalchemy.orm import Session

__all__ = [
    "db_engine",
    "db_session",
    "db_url",
    "migrated_db_url",
    "migrated_sqlite_file",
    "postgres_database_url",
    "postgres_migration",
]

POSTGRES_CANDIDATES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
)


def _libpq(url: str) -> str:
    """A libpq conninfo for psycopg from a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _find_postgres() -> tuple[str | None, str]:
    """The first server URL that accepts a connection, or ``None`` and the errors."""
    import psycopg

    override = os.environ.get("ARENA_TEST_POSTGRES_URL")
    errors = []
    for url in (override,) if override else POSTGRES_CANDIDATES:
        try:
            with psycopg.connect(_libpq(url), connect_timeout=3):
                return url, ""
        except psycopg.Error as exc:
            errors.append(f"{make_url(url).render_as_string()}: {str(exc).strip()}")
    return None, "; ".join(errors)


@pytest.fixture(scope="session")
def postgres_database_url() -> Iterator[str]:
    """A database created for this pytest process (xdist worker), dropped afterwards."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    server_url, errors = _find_postgres()
    if server_url is None:
        pytest.skip(f"PostgreSQL unreachable ({errors})")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"arena_test_{worker}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_libpq(server_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(server_url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _postgres_schema(database_url: str) -> Iterator[str]:
    """The URL of a new schema of ``database_url``, dropped afterwards."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(database_url), autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(database_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(database_url), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of an empty database private to this test (SQLite file or PostgreSQL schema)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("db") / "arena.sqlite3"
        yield f"sqlite+pysqlite:///{path}"
    else:
        with _postgres_schema(request.getfixturevalue("postgres_database_url")) as url:
            yield url


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file upgraded to the latest migration, once per pytest process (xdist worker)."""
    from arena.storage.db import upgrade

    path = tmp_path_factory.mktemp("db-migrated") / "arena.sqlite3"
    upgrade(f"sqlite+pysqlite:///{path}")
    # Its engine is disposed: the WAL is checkpointed into the file and removed.
    assert [p.name for p in path.parent.iterdir()] == [path.name], list(path.parent.iterdir())
    return path


@pytest.fixture(scope="session")
def postgres_migration(postgres_database_url: str) -> list[tuple[str, Any, bool]]:
    """The SQL that ``upgrade`` runs on an empty PostgreSQL schema, recorded once per pytest process:
    each statement (DDL, the version table's rows, the data migrations' queries), its parameters and
    whether it was an executemany. No statement names the schema (``search_path`` selects it)."""
    from arena.storage.db import upgrade

    statements: list[tuple[str, Any, bool]] = []
    with _postgres_schema(postgres_database_url) as url:
        options = make_url(url).query["options"]

        def record(conn, cursor, statement, parameters, context, executemany) -> None:
            if conn.engine.url.query.get("options") == options:  # upgrade's engine, not another thread's
                statements.append((statement, parameters, executemany))

        event.listen(Engine, "before_cursor_execute", record)
        try:
            upgrade(url)
        finally:
            event.remove(Engine, "before_cursor_execute", record)
    return statements


@pytest.fixture
def migrated_db_url(db_url: str, request: pytest.FixtureRequest) -> str:
    """``db_url`` upgraded to the latest migration, without running Alembic per test (0.15-0.45 s
    each): a SQLite file is a copy of one migrated once per session (the bytes ``upgrade`` wrote), a
    PostgreSQL schema gets the statements ``upgrade`` ran on an empty one, replayed in one transaction.
    tests/storage/db/test_migrations.py runs ``upgrade`` itself."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        shutil.copyfile(request.getfixturevalue("migrated_sqlite_file"), url.database)
        return db_url
    import psycopg

    with psycopg.connect(_libpq(db_url)) as connection:  # one transaction, committed at the end
        for statement, parameters, many in request.getfixturevalue("postgres_migration"):
            if many:
                connection.cursor().executemany(statement, parameters)
            else:
                connection.execute(statement, parameters)
    return db_url


@pytest.fixture
def db_engine(migrated_db_url: str) -> Iterator[Engine]:
    """An engine on a migrated, empty database (disposed after the test)."""
    from arena.storage.db import make_engine

    engine = make_engine(migrated_db_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def db_session(db_engine: Engine) -> Iterator[Session]:
    """A session on a migrated, empty database; the test commits when it wants to."""
    from arena.storage.db import session_factory

    with session_factory(db_engine)() as session:
        yield session
