"""Users and API tokens (stored hashed, unique), snapshots (immutable, by sha256)."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from arena.storage.db import repositories as repo
from arena.storage.db.models import ApiToken
from envs.registry import get_spec
from tests.storage.db.builders import ENV, RATING


def test_tokens_are_stored_as_unique_sha256_hashes(db_session):
    alice = repo.create_user(db_session, "alice")
    bob = repo.create_user(db_session, "bob", is_admin=True)
    repo.add_api_token(db_session, alice, "secret-token-1")
    db_session.commit()

    stored = db_session.execute(select(ApiToken.token_hash)).scalars().all()
    assert stored == [hashlib.sha256(b"secret-token-1").hexdigest()]
    assert repo.user_for_token(db_session, "secret-token-1").name == "alice"
    assert repo.user_for_token(db_session, "wrong") is None

    with pytest.raises(IntegrityError):
        repo.add_api_token(db_session, bob, "secret-token-1")
    db_session.rollback()
    assert repo.get_user_by_name(db_session, "bob").is_admin is True


def test_a_revoked_token_stops_working(db_session):
    alice = repo.create_user(db_session, "alice")
    repo.add_api_token(db_session, alice, "t")

    assert repo.revoke_api_token(db_session, "t") is True
    assert repo.revoke_api_token(db_session, "t") is False
    assert repo.user_for_token(db_session, "t") is None


def test_user_names_are_unique(db_session):
    repo.create_user(db_session, "alice")
    with pytest.raises(IntegrityError):
        repo.create_user(db_session, "alice")


def test_snapshots_are_stored_once_and_listed_without_weights(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    league = repo.create_league(db_session, "main", ENV, {"pfsp": True})
    parent_bytes, child_bytes = b"\x00" * 1000, b"\x01" * 2000
    parent = hashlib.sha256(parent_bytes).hexdigest()
    child = hashlib.sha256(child_bytes).hexdigest()

    assert repo.put_snapshot(db_session, parent, env_id=ENV, spec={"arch": "mlp"},
                             weights=parent_bytes) is True
    assert repo.put_snapshot(db_session, child, env_id=ENV, spec={"arch": "mlp"},
                             size_bytes=2000, league_id=league, parent_sha256=parent) is True
    assert repo.put_snapshot(db_session, parent, env_id=ENV, spec={"other": 1},
                             weights=parent_bytes) is False
    db_session.commit()

    assert repo.get_snapshot_weights(db_session, parent) == parent_bytes
    assert repo.get_snapshot_weights(db_session, child) is None  # no durable copy kept
    listed = {s.sha256: s for s in repo.list_snapshots(db_session, env_id=ENV)}
    assert set(listed) == {parent, child}
    assert listed[parent].has_weights and not listed[child].has_weights
    assert listed[parent].spec == {"arch": "mlp"} and listed[parent].size_bytes == 1000
    assert [s.sha256 for s in repo.list_snapshots(db_session, league_id=league)] == [child]
    assert repo.get_league(db_session, league).config == {"pfsp": True}


def test_snapshot_weights_must_match_their_hash(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    with pytest.raises(ValueError, match="hash to"):
        repo.put_snapshot(db_session, "0" * 64, env_id=ENV, spec={}, weights=b"abc")
    with pytest.raises(ValueError, match="size_bytes"):
        repo.put_snapshot(db_session, "0" * 64, env_id=ENV, spec={})
