"""Structured logs: ids attached with ``extra=`` reach both formats; the recorder logs
every forfeit with its match and agent ids."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from arena.core.logs import JsonFormatter, TextFormatter, configure_logging
from arena.engine import MatchRecord
from arena.ladder.recorder import MatchRecorder
from arena.ladder.registration import register_builtin_agents
from arena.storage.db import make_engine, session_factory
from envs.registry import get_spec
from league.ratings.rating import RatingEnv


def _record(msg: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord("arena.test", logging.INFO, __file__, 1, msg, (), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_extra_ids():
    line = JsonFormatter().format(_record("match forfeited", match_id="m-1", agent_id=7))
    data = json.loads(line)
    assert data["msg"] == "match forfeited" and data["level"] == "INFO" and data["logger"] == "arena.test"
    assert data["match_id"] == "m-1" and data["agent_id"] == 7 and "ts" in data


def test_text_lines_append_the_extra_ids_as_key_value():
    line = TextFormatter().format(_record("agent rejected", agent_id=3, status="rejected"))
    assert line.endswith("arena.test: agent rejected agent_id=3 status=rejected")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="'text' or 'json'"):
        configure_logging("xml")


def test_a_recorded_forfeit_is_logged_with_match_and_agent_ids(migrated_db_url, caplog):
    sessions = session_factory(make_engine(migrated_db_url))
    spec = get_spec("tictactoe-v3")
    with sessions.begin() as session:
        ids = register_builtin_agents(session, spec.env_id, ["random", "bad"])
    match_id = str(uuid.uuid4())
    forfeit = MatchRecord(env=spec.env_id, seed=1, seats=["random", "bad"], weights=[None, None],
                          actions=[(0, 4), (1, 4)], scores=[1.0, -1.0], winner=0,
                          termination="illegal_action", forfeit_seat=1, match_id=match_id,
                          detail="action 4 is not legal")
    with caplog.at_level(logging.INFO, logger="arena.ladder.recorder"):
        MatchRecorder(sessions, spec, RatingEnv()).record([forfeit], ids)
    [entry] = [r for r in caplog.records if r.getMessage().startswith("match forfeited")]
    assert entry.match_id == match_id and entry.agent == "bad" and entry.agent_id == ids["bad"]
    assert entry.reason == "illegal_action"
