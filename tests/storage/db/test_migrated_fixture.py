"""The suite's ``migrated_db_url`` (tests/fixtures_db.py) is what ``upgrade`` makes.

The fixture does not run Alembic per test: on SQLite it copies a file migrated once per
pytest process, on PostgreSQL it replays the statements one ``upgrade`` ran. Hundreds of
tests stand on it, so a migration the copy or the replay renders differently (a statement
that names its schema, a data migration that reads what it wrote) must fail here: the
schema (tables, columns, keys, indexes, constraints) and every row are compared with a
database of the same kind migrated by ``upgrade`` itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import MetaData, inspect, make_url, select

from arena.storage.db import make_engine, upgrade
from tests.fixtures_db import _postgres_schema


@contextmanager
def _upgraded_like(url: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Another empty database of ``url``'s kind, migrated by ``upgrade``."""
    if make_url(url).get_backend_name() == "sqlite":
        other = f"sqlite+pysqlite:///{tmp_path / 'upgraded.sqlite3'}"
        upgrade(other)
        yield other
    else:
        with _postgres_schema(request.getfixturevalue("postgres_database_url")) as other:
            upgrade(other)
            yield other


def _describe(url: str) -> dict:
    """Every table's columns, keys, indexes, constraints and rows, with schema names taken out."""
    engine = make_engine(url)
    try:
        found = inspect(engine)
        schema = found.default_schema_name or ""
        out = {}
        for table in sorted(found.get_table_names()):
            out[table] = {
                "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in
                            found.get_columns(table)],
                "primary_key": found.get_pk_constraint(table)["constrained_columns"],
                "foreign_keys": sorted((fk["constrained_columns"], fk["referred_table"], fk["referred_columns"],
                                        fk.get("options")) for fk in found.get_foreign_keys(table)),
                "indexes": sorted((i["name"], i["column_names"], i["unique"], i.get("dialect_options"))
                                  for i in found.get_indexes(table)),
                "unique": sorted((u["name"], u["column_names"]) for u in found.get_unique_constraints(table)),
                "checks": sorted((c["name"], c["sqltext"]) for c in found.get_check_constraints(table)),
            }
        tables = MetaData()
        tables.reflect(engine)
        with engine.connect() as connection:
            for name, table in tables.tables.items():
                out[name]["rows"] = sorted(map(repr, connection.execute(select(table)).all()))
    finally:
        engine.dispose()
    text = json.dumps(out, default=str, sort_keys=True, indent=1)  # an index's where clause as its SQL
    return json.loads(re.sub(rf"\b{re.escape(schema)}\.", "", text) if schema else text)


def test_the_suites_migrated_database_is_what_upgrade_makes(migrated_db_url, request, tmp_path):
    replayed = _describe(migrated_db_url)
    with _upgraded_like(migrated_db_url, request, tmp_path) as upgraded:
        assert replayed == _describe(upgraded)
    assert "alembic_version" in replayed and replayed["alembic_version"]["rows"]
