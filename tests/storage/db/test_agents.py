"""Agents and envs: bulk get-or-create, unique (env_id, key), status changes."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from arena.storage.db import repositories as repo
from arena.storage.db.models import Agent
from envs.errors import UnknownAgent
from envs.registry import get_spec
from tests.storage.db.builders import ENV, RATING


def test_ensure_env_inserts_once_and_keeps_the_first_rating_constants(db_session):
    spec = get_spec(ENV)
    assert repo.ensure_env(db_session, spec, RATING) is True
    assert repo.ensure_env(db_session, spec, {**RATING, "beta": 1.0}) is False
    assert repo.get_env_spec(db_session, ENV) == {"seats": list(spec.seats), "roles": list(spec.roles)}
    assert repo.get_env_rating(db_session, ENV) == RATING
    assert repo.get_env_spec(db_session, "nope-v0") is None
    assert repo.get_env_rating(db_session, "nope-v0") is None


def test_get_or_create_agents_is_idempotent_and_bulk(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    first = repo.get_or_create_agents(db_session, ENV, ["random", "heuristic"], "builtin")
    db_session.commit()

    second = repo.get_or_create_agents(
        db_session, ENV, ["heuristic", "heuristic:epsilon=0.3", "random", "heuristic"], "builtin",
        names={"heuristic:epsilon=0.3": "Heuristic (30% random)"}, status="rated",
    )

    assert {k: second[k] for k in first} == first
    assert len(set(second.values())) == 3
    created = repo.get_agent(db_session, second["heuristic:epsilon=0.3"])
    assert (created.name, created.status, created.kind) == ("Heuristic (30% random)", "rated", "builtin")
    assert repo.get_agent(db_session, first["random"]).status == "queued"  # existing untouched
    total = db_session.execute(select(func.count()).select_from(Agent)).scalar_one()
    assert total == 3


def test_the_same_key_is_one_agent_per_env(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    repo.ensure_env(db_session, get_spec("tictactoe-v3"), RATING)
    a = repo.get_or_create_agents(db_session, ENV, ["random"], "builtin")["random"]
    b = repo.get_or_create_agents(db_session, "tictactoe-v3", ["random"], "builtin")["random"]
    db_session.commit()
    assert a != b
    assert repo.get_agent_by_key(db_session, "tictactoe-v3", "random").id == b

    db_session.add(Agent(key="random", env_id=ENV, name="dup", kind="builtin"))
    with pytest.raises(IntegrityError):
        db_session.flush()


def test_the_database_checks_kind_and_status(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    db_session.add(Agent(key="x", env_id=ENV, name="x", kind="wizard"))
    with pytest.raises(IntegrityError):
        db_session.flush()
    db_session.rollback()
    with pytest.raises(ValueError, match="kind must be one of"):
        repo.get_or_create_agents(db_session, ENV, ["x"], "wizard")


def test_set_agent_status_records_the_reason(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    agent_id = repo.get_or_create_agents(db_session, ENV, ["mlp-0123abcd"], "neural")["mlp-0123abcd"]
    before = repo.get_agent(db_session, agent_id)

    repo.set_agent_status(db_session, agent_id, "rejected", "obs_shape [6, 7] != [6, 7, 2]")
    after = repo.get_agent(db_session, agent_id)

    assert (after.status, after.status_reason) == ("rejected", "obs_shape [6, 7] != [6, 7, 2]")
    assert after.updated_at >= before.updated_at
    assert [a.key for a in repo.list_agents(db_session, ENV, statuses={"rejected"})] == ["mlp-0123abcd"]
    assert repo.list_agents(db_session, ENV, statuses={"queued"}) == []
    with pytest.raises(ValueError, match="is not a valid AgentStatus"):
        repo.set_agent_status(db_session, agent_id, "famous")
    with pytest.raises(UnknownAgent):
        repo.set_agent_status(db_session, 987_654, "rated")


def test_status_moves_follow_the_lifecycle_and_a_retirement_is_final(db_session):
    repo.ensure_env(db_session, get_spec(ENV), RATING)
    agent_id = repo.get_or_create_agents(db_session, ENV, ["mlp-0123abcd"], "neural")["mlp-0123abcd"]
    assert not repo.set_agent_status(db_session, agent_id, "rated")  # queued agents are validated first
    for status in ("validating", "placement", "rated", "placement"):
        assert repo.set_agent_status(db_session, agent_id, status)
    stamp = repo.get_agent(db_session, agent_id).updated_at
    assert repo.set_agent_status(db_session, agent_id, "placement")  # already there: untouched
    assert repo.get_agent(db_session, agent_id).updated_at == stamp
    assert repo.set_agent_status(db_session, agent_id, "retired", "by its owner")
    # A ladder finishing a batch after the retirement cannot bring the agent back.
    assert not repo.set_agent_status(db_session, agent_id, "rated")
    after = repo.get_agent(db_session, agent_id)
    assert (after.status, after.status_reason) == ("retired", "by its owner")
