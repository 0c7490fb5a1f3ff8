"""Scratch PostgreSQL databases for the benchmarks that run the service's processes on one:
created on the server, dropped afterwards (unless the run keeps it to find a fault)."""

from __future__ import annotations

import os
import uuid

from sqlalchemy import make_url

POSTGRES_URL = os.environ.get("ARENA_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
"""The server the tests use (``ARENA_TEST_POSTGRES_URL``), any database on it."""


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def create_database(server_url: str, prefix: str) -> str:
    """A new empty database on ``server_url``'s server; its name (``prefix`` + a random tail)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_libpq(server_url), autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(server_url: str, name: str) -> None:
    """Drop database ``name`` (its connections closed first)."""
    import psycopg

    with psycopg.connect(_libpq(server_url), autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(server_url: str, name: str) -> str:
    """``server_url`` pointed at database ``name``."""
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def migrate(settings) -> None:
    """Migrate the database of ``settings`` to the latest schema now, importing only Alembic and
    the models (not torch, as ``open_services`` does): API processes started next find it ready,
    none racing another to create it, and boot while this process imports the rest."""
    from arena.core.settings import resolved_database_url
    from arena.storage.db import upgrade

    upgrade(resolved_database_url(settings))


def open_services(settings):
    """:func:`arena.storage.wiring.open_services`, imported only when called: a script that starts
    server processes first (after :func:`migrate`) imports it, and torch, while they boot."""
    from arena.storage.wiring import open_services

    return open_services(settings)
