"""Registering connected agents, and the schema's agent kinds (migration 0008_connected)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from arena.ladder.registration import register_connected_agent
from arena.storage.db import make_engine
from envs.errors import InvalidSubmission


def test_the_same_owner_and_name_is_one_agent_and_roles_are_checked(db_session):
    first, created = register_connected_agent(db_session, "connect_four-v3", "bot", None, None)
    again, created_again = register_connected_agent(db_session, "connect_four-v3", "bot", None, None)
    assert created and not created_again and first.id == again.id
    assert first.kind == "connected" and first.status == "placement" and first.role is None
    seeker, _ = register_connected_agent(db_session, "hide_and_seek-v0", "bot", None, "seeker")
    assert seeker.role == "seeker" and seeker.key.endswith("@seeker")
    with pytest.raises(InvalidSubmission, match="several roles"):
        register_connected_agent(db_session, "hide_and_seek-v0", "bot", None, None)
    with pytest.raises(InvalidSubmission, match="no role"):
        register_connected_agent(db_session, "connect_four-v3", "bot", None, "goalie")


def test_the_schema_allows_connected_and_human_kinds_only(migrated_db_url):
    engine = make_engine(migrated_db_url)
    insert = text("INSERT INTO agents (key, env_id, name, kind, status, status_reason, created_at, updated_at) "
                  "VALUES (:key, 'e', 'n', :kind, 'placement', '', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO envs (id, spec) VALUES ('e', '{}')"))
            conn.execute(insert, {"key": "a", "kind": "connected"})
            conn.execute(insert, {"key": "b", "kind": "human"})
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"key": "c", "kind": "robot"})
    finally:
        engine.dispose()
