"""Migrations: empty database to head, in step with the models, reversible."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from arena.storage.db import Base, current_revision, downgrade, head_revision, make_engine, upgrade
from tests.races import race

TABLES = {
    "users", "api_tokens", "envs", "leagues", "snapshots", "agents", "matches",
    "match_participants", "ratings", "rating_events", "match_queue", "league_generations", "probes",
    "web_sessions", "competitions", "competition_organizers", "competition_members", "competition_teams",
    "competition_team_members", "competition_entries", "competition_references", "board_ratings",
    "tournaments",
}


@pytest.fixture
def migrated_db_url(db_url: str) -> str:
    """``db_url`` migrated by ``upgrade`` itself (the suite's fixture copies or replays a migration)."""
    upgrade(db_url)
    return db_url


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_from_empty_to_head_creates_every_table(db_url):
    assert current_revision(db_url) is None
    assert _tables(db_url) == set()

    upgrade(db_url)

    assert current_revision(db_url) == head_revision() == "0015_exploiters"
    assert _tables(db_url) == TABLES | {"alembic_version"}


def test_migrated_schema_matches_the_models(migrated_db_url):
    engine = make_engine(migrated_db_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diffs = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diffs == []


def test_migrated_schema_has_the_query_indexes(migrated_db_url):
    engine = make_engine(migrated_db_url)
    try:
        inspector = inspect(engine)
        names = {t: {ix["name"] for ix in inspector.get_indexes(t)} for t in TABLES}
    finally:
        engine.dispose()
    assert "ix_matches_env_id_seq" in names["matches"]
    assert "ix_match_participants_agent_id_match_seq" in names["match_participants"]
    assert "ix_ratings_env_id_role_conservative" in names["ratings"]
    assert "ix_matches_board_seq" in names["matches"]
    assert "ix_board_ratings_board_role_conservative" in names["board_ratings"]
    assert "ix_rating_events_agent_id_match_seq" in names["rating_events"]


def test_downgrade_to_base_then_upgrade_again(migrated_db_url):
    downgrade(migrated_db_url, "base")
    assert _tables(migrated_db_url) == {"alembic_version"}
    assert current_revision(migrated_db_url) is None

    upgrade(migrated_db_url)
    upgrade(migrated_db_url)  # already at head: a no-op, not an error

    assert current_revision(migrated_db_url) == head_revision()
    assert _tables(migrated_db_url) == TABLES | {"alembic_version"}


def test_upgrade_at_head_only_reads_the_revision(migrated_db_url, monkeypatch):
    """Every service start calls upgrade(): at head it asks the database its revision and
    leaves Alembic's scripts unloaded; one revision behind, Alembic still runs."""
    from arena.storage.db import migrate

    ran = []
    real = migrate.command.upgrade
    monkeypatch.setattr(migrate.command, "upgrade", lambda config, revision: ran.append(revision) or
                        real(config, revision))
    upgrade(migrated_db_url)
    assert ran == []

    previous = migrate.ScriptDirectory.from_config(migrate.alembic_config()).get_revision(head_revision()).down_revision
    downgrade(migrated_db_url, previous)
    upgrade(migrated_db_url)
    assert ran == ["head"]
    assert current_revision(migrated_db_url) == head_revision()


def test_concurrent_upgrades_migrate_once(db_url):
    # Every service process calls upgrade() on start; simultaneous starts must not race.
    race([lambda: upgrade(db_url)] * 3)  # raises the first upgrade's error, if any
    assert current_revision(db_url) == head_revision()
    assert _tables(db_url) == TABLES | {"alembic_version"}


@contextmanager
def _engine_at(db_url: str, revision: str, *inserts: str) -> Iterator[Engine]:
    """An engine on ``db_url`` migrated to ``revision`` and holding the rows of ``inserts`` (SQL), disposed
    on exit: the rows a later revision must carry over."""
    upgrade(db_url, revision)
    engine = make_engine(db_url)
    try:
        with engine.begin() as connection:
            for insert in inserts:
                connection.execute(text(insert))
        yield engine
    finally:
        engine.dispose()


def test_roles_revision_gives_existing_neural_agents_their_snapshots_role(db_url):
    with _engine_at(
        db_url, "0003",
        "INSERT INTO envs (id, spec) VALUES ('hide_and_seek-v0', '{}')",
        "INSERT INTO snapshots (sha256, env_id, spec, size_bytes) VALUES "
        "('ab', 'hide_and_seek-v0', '{\"role\": \"seeker\", \"arch\": \"mlp\"}', 1)",
        "INSERT INTO agents (key, env_id, name, kind, snapshot_sha256) VALUES "
        "('mlp-ab', 'hide_and_seek-v0', 'n', 'neural', 'ab'), "
        "('random', 'hide_and_seek-v0', 'random', 'builtin', NULL)",
    ) as engine:
        upgrade(db_url)
        with engine.connect() as connection:
            roles = dict(connection.execute(text("SELECT key, role FROM agents")).all())
    assert roles == {"mlp-ab": "seeker", "random": None}


def test_exploiters_revision_gives_existing_timeline_rows_no_exploiters(db_url):
    with _engine_at(
        db_url, "0014_divisions",
        "INSERT INTO envs (id, spec) VALUES ('hide_and_seek-v1', '{}')",
        "INSERT INTO leagues (name, env_id, config) VALUES ('l', 'hide_and_seek-v1', '{}')",
        "INSERT INTO league_generations (league_id, generation, episodes, phase_rates, ratings, first_matches) "
        "SELECT id, 3, 16, '{\"fort\": 0.5}', '{}', '{}' FROM leagues",
    ) as engine:
        upgrade(db_url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT generation, exploiters FROM league_generations")).all()
        downgrade(db_url, "0014_divisions")
        columns = {c["name"] for c in inspect(engine).get_columns("league_generations")}
    assert [(g, json.loads(x) if isinstance(x, str) else x) for g, x in rows] == [(3, [])]
    assert "exploiters" not in columns and "first_matches" in columns
