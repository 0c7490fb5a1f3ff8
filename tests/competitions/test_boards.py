"""A competition's boards on the background service, on SQLite and PostgreSQL: the season board
beside the env's (exactly once, rebuild == live, the env board untouched), then the final
evaluation: frozen pool, certified or stopped, resumed after a kill with nothing lost or twice."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.competitions import entries, final, service, teams
from arena.competitions.rules import CompetitionSettings, board_key, final_board_key
from arena.competitions.season import CompetitionBoards
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.dispatch import queue_lane
from arena.ladder.pacing import LadderPacer
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.registration import ladder_rating_env, register_builtin_agents
from arena.ladder.submissions import Submission, submit_agent
from arena.read.competitions import board_public as read_board
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import open_services
from envs.registry import get_spec
from league.competitions.certification import FINAL_RATING_ENV
from tests.ladder.dying_runner import Crash, DiesAfter

ADMIN = service.Caller(None, "admin", True)


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        yield svc


def _competition(services, env: str, **overrides) -> int:
    now = utcnow()
    settings = CompetitionSettings(env_id=env, title="t", opens_at=now - timedelta(minutes=1),
                                   deadline=now + timedelta(hours=1),
                                   **{"daily_submissions": 5, "active_entries": 2, "reference_agents": ("random",),
                                      **overrides})
    cid = service.create_competition(services, ADMIN, settings)
    service.open_competition(services, ADMIN, cid)
    return cid


def _players(services, cid: int, names: list[str]) -> list[service.Caller]:
    def make(session):
        return [repo.create_user(session, n) for n in names]
    ids = services.sessions.write_transaction(make, what="users")
    callers = [service.Caller(i, n, False) for i, n in zip(ids, names, strict=True)]
    for caller in callers:
        teams.create_team(services, caller, cid, f"team-{caller.name}")
    return callers


def _enter(services, cid: int, caller: service.Caller, env: str, seed: int) -> int:
    state, spec = random_init_checkpoint(env, "mlp", {"hidden": [8]}, seed=seed)
    sub = Submission(serialize_weights(state), json.dumps(spec.to_json()).encode(), env, f"{caller.name}-{seed}")
    return submit_agent(services, caller.user_id, caller.name, sub,
                        tag=entries.entry_tag(cid, caller, "weights", env))


def _board_matches(services, env: str, board: str) -> list:
    with services.sessions() as session:
        return list(repo.iter_matches(session, env_id=env, board=board))


def _lane_queue(services, env: str, board: str) -> list:
    with services.sessions() as session:
        return [q for q in repo.queued_matches(session, env) if queue_lane(q.batch_key) == board]


def test_the_season_board_rates_its_own_pool_beside_the_env_board(services):
    env = "tictactoe-v3"
    cid = _competition(services, env)
    callers = _players(services, cid, ["ann", "ben"])
    entries = [_enter(services, cid, c, env, 10 * k + seed) for k, c in enumerate(callers) for seed in (1, 2, 3)]
    background = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                   ServiceConfig(envs=(env,), batch_size=64, max_rate=1e9, seed=3))
    try:
        for _ in range(3):
            background.step()
    finally:
        background.stop()
    board = board_key(cid)
    matches = _board_matches(services, env, board)
    with services.sessions() as session:
        active = {e.agent_id for e in comp_repo.entries(session, cid, active=True)}
        pool = active | set(comp_repo.references(session, cid))
        rated_on_board = {a for a, _ in comp_repo.load_board_ratings(session, board)}
        env_board_seqs = {m.seq for m in repo.iter_matches(session, env_id=env) if m.rated}
    assert len(active) == 4 and active < set(entries)  # each team's latest two
    assert matches and not any(m.rated for m in matches)  # read by their board; never on the env ladder
    assert rated_on_board <= pool and len(rated_on_board) >= 2
    assert {m.seq for m in matches}.isdisjoint(env_board_seqs)
    # The env board is rebuilt from its own matches only, and so is the competition's.
    assert rebuild_ratings(services.sessions, get_spec(env)).equal
    assert rebuild_ratings(services.sessions, get_spec(env), board=board).equal


def test_a_season_batch_lost_with_its_worker_is_played_once_by_the_next_service(services):
    env = "connect_four-v3"
    cid = _competition(services, env)
    with services.sessions.begin() as session:
        team = comp_repo.create_team(session, cid, "builtins", "code-builtins")
        ids = register_builtin_agents(session, env, ["heuristic", "heuristic:epsilon=0.5"])
        for agent_id in ids.values():
            comp_repo.add_entry(session, cid, team, agent_id, None, utcnow())
    with services.sessions() as session:
        competition = comp_repo.get_competition(session, cid)
    dying = DiesAfter(good=0)
    boards = CompetitionBoards(services, dying, LadderPacer(seed=1), batch_size=32)
    with pytest.raises(Crash):
        boards.season_round(competition)
    lost = set(dying.dispatched[0])
    assert {q.match_id for q in _lane_queue(services, env, board_key(cid))} == lost
    assert _board_matches(services, env, board_key(cid)) == []

    again = CompetitionBoards(services, InProcessRunner(), LadderPacer(seed=1), batch_size=32)
    recorded = again.season_round(competition)
    matches = _board_matches(services, env, board_key(cid))
    ids_recorded = [m.id for m in matches]
    assert lost <= set(ids_recorded) and len(ids_recorded) == len(set(ids_recorded)) == recorded
    assert _lane_queue(services, env, board_key(cid)) == []
    assert rebuild_ratings(services.sessions, get_spec(env), board=board_key(cid)).equal


def test_the_final_evaluation_freezes_the_pool_certifies_and_survives_a_kill(services):
    env = "connect_four-v3"
    cid = _competition(services, env, top_k=2, final_floor=4, final_match_budget=3000)
    with services.sessions.begin() as session:
        ids = register_builtin_agents(session, env, ["heuristic", "heuristic:epsilon=0.5", "random"])
        for name, agent_id in ids.items():
            team = comp_repo.create_team(session, cid, f"t-{name}", f"code-{agent_id}")
            comp_repo.add_entry(session, cid, team, agent_id, None, utcnow())
    late = utcnow() + timedelta(hours=2)  # the service's clock, past the deadline
    assert final.start_final(services.sessions, cid, late)
    assert not final.start_final(services.sessions, cid, late)  # once
    with services.sessions.begin() as session:  # a retirement after the deadline does not shrink the pool
        repo.set_agent_status(session, ids["random"], "retired", "retired by its owner")
    with services.sessions() as session:
        competition = comp_repo.get_competition(session, cid)
        frozen = [e.agent_id for e in comp_repo.entries(session, cid, frozen=True)]
    assert competition.state == "final" and sorted(frozen) == sorted(ids.values())

    board = final_board_key(cid)
    dying = DiesAfter(good=0)
    with pytest.raises(Crash):
        final.FinalEvaluations(services, dying, batch_size=64, now=lambda: late).round(competition)
    assert {q.match_id for q in _lane_queue(services, env, board)} == set(dying.dispatched[0])

    driver = final.FinalEvaluations(services, InProcessRunner(), batch_size=64, now=lambda: late)
    for _ in range(60):
        with services.sessions() as session:
            competition = comp_repo.get_competition(session, cid)
        if competition.state == "finished":
            break
        driver.round(competition)
    result = competition.final_result
    matches = _board_matches(services, env, board)
    assert competition.state == "finished" and result["stopped"] == "certified", result and result["stopped"]
    assert set(dying.dispatched[0]) <= {m.id for m in matches}
    assert len({m.id for m in matches}) == len(matches) == result["matches"]
    assert _lane_queue(services, env, board) == []
    assert [s["entry"] for s in result["standings"]] == [ids["heuristic"], ids["heuristic:epsilon=0.5"],
                                                         ids["random"]]
    assert all(p["status"] in ("separated", "tied") for p in result["pairs"])
    keys = {"heuristic": ids["heuristic"], "heuristic:epsilon=0.5": ids["heuristic:epsilon=0.5"],
            "random": ids["random"]}
    again = final.recompute(frozen, final.games_of(matches, keys), final.certification_config(competition))
    assert final.published(again, len(matches), "certified") == result
    assert rebuild_ratings(services.sessions, get_spec(env), board=board, rating_env=FINAL_RATING_ENV).equal


def test_the_final_evaluation_stops_at_its_end_date_and_publishes_what_is_open(services):
    env = "connect_four-v3"
    now = utcnow()
    cid = _competition(services, env, final_ends_at=now + timedelta(hours=3), final_floor=2)
    with services.sessions.begin() as session:
        ids = register_builtin_agents(session, env, ["heuristic", "heuristic:epsilon=0.2"])
        for name, agent_id in ids.items():
            team = comp_repo.create_team(session, cid, f"t-{name}", f"code-{agent_id}")
            comp_repo.add_entry(session, cid, team, agent_id, None, utcnow())
    assert final.start_final(services.sessions, cid, now + timedelta(hours=2))
    with services.sessions() as session:
        competition = comp_repo.get_competition(session, cid)
    during = final.FinalEvaluations(services, InProcessRunner(), batch_size=8, now=lambda: now + timedelta(hours=2))
    assert during.round(competition) == 8  # before the end: it plays
    after = final.FinalEvaluations(services, InProcessRunner(), batch_size=8, now=lambda: now + timedelta(hours=4))
    assert after.round(competition) == 0
    with services.sessions() as session:
        competition = comp_repo.get_competition(session, cid)
    result = competition.final_result
    assert competition.state == "finished" and result["stopped"] == "end of the final evaluation"
    assert result["matches"] == 8 and not result["certified"]
    assert [p["status"] for p in result["pairs"]] and all(p["status"] != "separated" or p["confidence"] >= 0.95
                                                          for p in result["pairs"])


def test_entries_move_up_the_divisions_past_their_bosses_and_never_down(services):
    env = "connect_four-v3"
    cid = _competition(services, env, reference_agents=("random", "heuristic:epsilon=0.5"),
                       divisions=(("bronze", "random"), ("silver", "heuristic:epsilon=0.5"), ("gold", None)))
    with services.sessions.begin() as session:
        team = comp_repo.create_team(session, cid, "builtins", "code-divisions")
        ids = register_builtin_agents(session, env, ["heuristic", "heuristic:epsilon=0.9"])
        for agent_id in ids.values():
            comp_repo.add_entry(session, cid, team, agent_id, None, utcnow())
        competition = comp_repo.get_competition(session, cid)
    boards = CompetitionBoards(services, InProcessRunner(), LadderPacer(seed=4), batch_size=64)
    history: list[dict[int, int]] = []
    for _ in range(12):
        boards.season_round(competition)
        with services.sessions() as session:
            history.append({e.agent_id: e.division for e in comp_repo.entries(session, cid)})
    for before, after in pairwise(history):
        assert all(after[a] >= before[a] for a in before)  # never down
    assert history[-1][ids["heuristic"]] >= 1  # past random's mu by 3 sigma: out of bronze
    with services.sessions() as session:
        competition = comp_repo.get_competition(session, cid)
        _, rows = read_board(session, competition, False, ladder_rating_env(session, env))
    by_agent = {r["agent_id"]: r["division"] for r in rows}
    names = ["bronze", "silver", "gold"]
    assert by_agent[ids["heuristic"]] == names[history[-1][ids["heuristic"]]]
    bosses = [d["boss"] for d in competition.divisions[:2]]
    assert [by_agent[b] for b in bosses] == ["bronze", "silver"]  # each boss sits in the division it guards


def test_a_withdrawn_latest_entry_gives_its_active_place_back(services):
    env = "connect_four-v3"
    cid = _competition(services, env, active_entries=1)
    with services.sessions.begin() as session:
        team = comp_repo.create_team(session, cid, "one", "code-one")
        ids = register_builtin_agents(session, env, ["heuristic", "heuristic:epsilon=0.5"])
        for name in ("heuristic", "heuristic:epsilon=0.5"):  # the second is the latest
            comp_repo.add_entry(session, cid, team, ids[name], None, utcnow())
            comp_repo.keep_latest_active(session, cid, team, 1)

    def active() -> set[int]:
        with services.sessions() as session:
            return {e.agent_id for e in comp_repo.entries(session, cid, active=True)}

    assert active() == {ids["heuristic:epsilon=0.5"]}
    with services.sessions.begin() as session:
        repo.set_agent_status(session, ids["heuristic:epsilon=0.5"], "retired", "withdrawn by its team")
    CompetitionBoards(services, InProcessRunner(), LadderPacer(seed=5), batch_size=8).round()
    assert active() == {ids["heuristic"]}
