"""Database fixtures: every test that asks for ``db_url`` runs on SQLite and PostgreSQL.

Import into ``tests/conftest.py`` with ``from tests.fixtures_db import *`` (or name all
of ``__all__``: ``db_url`` looks ``postgres_database_url`` up by name), or list
``"tests.fixtures_db"`` in ``pytest_plugins``.

* ``db_url`` - an EMPTY database private to one test: a fresh SQLite file, or a fresh
  PostgreSQL schema (selected through ``search_path`` in the URL's ``options``).
* ``migrated_db_url`` - the same, upgraded to the latest migration (on SQLite: a copy of
  ``migrated_sqlite_file``, a file migrated once per pytest process).
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
from pathlib import Path

import pytest
from sqlalchemy import Engine, make_url
from sqlalchemy.orm import Session

__all__ = [
    "db_engine",
    "db_session",
    "db_url",
    "migrated_db_url",
    "migrated_sqlite_file",
    "postgres_database_url",
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


def _postgres_schema_url(request: pytest.FixtureRequest) -> Iterator[str]:
    import psycopg

    database_url = request.getfixturevalue("postgres_database_url")
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
        yield from _postgres_schema_url(request)


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file upgraded to the latest migration, once per pytest process (xdist worker)."""
    from arena.storage.db import upgrade

    path = tmp_path_factory.mktemp("db-migrated") / "arena.sqlite3"
    upgrade(f"sqlite+pysqlite:///{path}")
    # Its engine is disposed: the WAL is checkpointed into the file and removed.
    assert [p.name for p in path.parent.iterdir()] == [path.name], list(path.parent.iterdir())
    return path


@pytest.fixture
def migrated_db_url(db_url: str, migrated_sqlite_file: Path) -> str:
    """``db_url`` upgraded to the latest migration. A SQLite file is a copy of one migrated once
    per session (the same bytes ``upgrade`` writes, without replaying the migrations per test)."""
    from arena.storage.db import upgrade

    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        shutil.copyfile(migrated_sqlite_file, url.database)
    else:
        upgrade(db_url)
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
