"""Tournaments on the background service, on SQLite and PostgreSQL: a Swiss tournament of six
scripted agents played to the end (exact game counts, seats alternated, no rematches,
unrated on the ladder), and a service SIGKILLed mid-round whose successor finishes it with
nothing lost or played twice."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from arena.competitions import service
from arena.competitions import tournaments as tours
from arena.competitions.tournament_games import TournamentGames, advance, tournament_queue
from arena.core.errors import Forbidden, InvalidParameter
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.registration import register_builtin_agents
from arena.ladder.work_queue import MAX_ATTEMPTS
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.db.repositories import tournaments as tour_repo
from arena.storage.wiring import open_services
from tests.client.live import REPO_ROOT
from tests.waiting import wait_for

ENV = "connect_four-v3"
ADMIN = service.Caller(None, "admin", True)
FIELD = ["heuristic", "heuristic:epsilon=0.2", "heuristic:epsilon=0.4", "heuristic:epsilon=0.6",
         "heuristic:epsilon=0.8", "random"]
ROUNDS, M = 3, 3
GAMES = ROUNDS * (len(FIELD) // 2) * M  # 27


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        yield svc


def _field(services) -> list[int]:
    ids = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, FIELD), what="builtins")
    return [ids[name] for name in FIELD]


def _swiss(services, entrants: list[int]) -> int:
    return tours.create_tournament(services, ADMIN, tours.TournamentSpec(
        title="Swiss", kind="swiss", games=M, rounds=ROUNDS, entrants=tuple(entrants), env_id=ENV))


def _wait_ended(services, tournament_id: int, timeout: float = 180.0) -> tour_repo.TournamentInfo:
    def ended() -> tour_repo.TournamentInfo | None:
        with services.sessions() as session:
            info = tour_repo.get_tournament(session, tournament_id)
        return info if info.state != "running" else None
    return wait_for(f"tournament {tournament_id} to end", ended, timeout_s=timeout)


def _games(services, tournament_id: int) -> list[repo.StoredMatch]:
    with services.sessions() as session:
        return list(repo.iter_matches(session, env_id=ENV, board=tours.board_of(tournament_id)))


def _check_played_out(services, tournament_id: int, entrants: list[int]) -> None:
    """Every game once, seats alternated within each mini-match, no rematch, every round complete."""
    with services.sessions() as session:
        info, state, stored = tours.load(session, tournament_id)
        keys = {a.key: a.id for a in repo.get_agents(session, entrants).values()}
    games = _games(services, tournament_id)
    assert len(games) == len(stored) == GAMES and len({g.id for g in games}) == GAMES
    assert all(not g.rated for g in games)  # unrated on the ladder
    assert state.finished and len(state.rounds) == ROUNDS
    by_id = {g.id: g for g in games}
    met = Counter()
    for rnd in state.rounds:
        assert len(rnd) == len(entrants) // 2 and {p for mm in rnd for p in (mm.pairing.a, mm.pairing.b)} == set(
            entrants)
        for mm in rnd:
            a, b = mm.pairing.a, mm.pairing.b
            met[frozenset((a, b))] += 1
            assert mm.complete and len(mm.scores) == M
            for g in range(M):
                seats = [keys[k] for k in by_id[tours.game_match_id(info, mm.pairing.round, mm.pairing.table, g)].seats]
                assert seats == ([a, b] if g % 2 == 0 else [b, a])
    assert max(met.values()) == 1  # no rematches
    assert sum(s.points for s in state.standings) == ROUNDS * len(entrants) // 2
    assert all(s.played == ROUNDS for s in state.standings)


def test_a_swiss_tournament_is_played_to_the_end_by_the_service(services):
    entrants = _field(services)
    with services.sessions() as session:
        rated_before = repo.count_matches(session, ENV)
    tid = _swiss(services, entrants)
    bg = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(), seed=3)).start()
    try:
        info = _wait_ended(services, tid)
    finally:
        bg.stop()
    assert (info.state, info.error) == ("finished", "") and info.finished_at is not None
    _check_played_out(services, tid, entrants)
    with services.sessions() as session:
        assert repo.count_matches(session, ENV) == rated_before + GAMES
    queue = tournament_queue(services.redis, services.pool.keys)
    assert services.redis.scard(queue.open_set) == 0 and services.redis.llen(queue.queue) == 0
    assert advance(services, tid) == 0  # finished: nothing more to queue


def test_a_service_killed_mid_tournament_is_resumed_by_the_next_nothing_lost_or_twice(
        services, migrated_db_url, redis_url, tmp_path):
    entrants = _field(services)
    tid = _swiss(services, entrants)
    queue = tournament_queue(services.redis, services.pool.keys)
    good = 5
    owner = subprocess.Popen([sys.executable, "-m", "tests.competitions.tournament_owner", migrated_db_url,
                              redis_url, str(tmp_path / "owner"), str(good)], cwd=REPO_ROOT)
    try:
        def hung() -> list[dict[str, str]] | None:
            records = [queue.fields(i.decode()) for i in services.redis.smembers(queue.open_set)]
            held = [r for r in records if r.get("status") == "playing"]
            recorded = _games(services, tid)
            # Read after the queue: a good game still marked playing while its record lands is
            # among the recorded ones, so two held games outside them are the two it hangs on.
            if len(recorded) == good and len(held) == 2 and not any(
                    json.loads(r["request"])["match_id"] in {g.id for g in recorded} for r in held):
                return held
            return None
        held = wait_for(f"the owner to play {good} games and hold two more (both its threads)", hung, timeout_s=120,
                        every_s=0.05, procs=[owner])
    finally:
        owner.kill()
        owner.wait(30)
    before = {g.id: g.seq for g in _games(services, tid)}
    assert len(before) == good
    assert all(r["owner"] and r["attempts"] == "1" for r in held)  # claimed, never finished, never given back

    worker = TournamentGames(services, poll_s=0.05, stale_s=1.0, heartbeat_s=0.2, sweep_s=0.2).start()
    try:
        info = _wait_ended(services, tid)
    finally:
        worker.stop()
    assert info.state == "finished"
    _check_played_out(services, tid, entrants)
    after = {g.id: g.seq for g in _games(services, tid)}
    assert {k: after[k] for k in before} == before  # the games recorded before the kill were not played again
    for record in held:  # the two it died holding were played by the next service, once each
        match_id = json.loads(record["request"])["match_id"]
        finished = queue.fields(match_id)
        assert (finished["status"], finished["attempts"]) == ("done", "2") and match_id in after


def test_only_organizers_create_tournaments_and_the_field_is_checked(services):
    entrants = _field(services)
    uid = services.sessions.write_transaction(lambda s: repo.create_user(s, "eve"), what="user")
    eve = service.Caller(uid, "eve", False)
    spec = tours.TournamentSpec(title="t", kind="swiss", games=1, entrants=tuple(entrants[:4]), env_id=ENV)
    with pytest.raises(Forbidden):
        tours.create_tournament(services, eve, spec)
    for bad in ({"entrants": (entrants[0],)}, {"entrants": (entrants[0], entrants[0])}, {"kind": "ladder"},
                {"games": 0}, {"kind": "round_robin", "rounds": 3}, {"env_id": "rps-v2"}):
        with pytest.raises(InvalidParameter):
            tours.create_tournament(services, ADMIN, tours.TournamentSpec(**{**spec.__dict__, **bad}))
    with services.sessions() as session:
        assert tour_repo.tournaments(session) == []


def test_a_game_that_kept_killing_its_services_fails_the_tournament_with_the_reason(services):
    entrants = _field(services)[:4]
    tid = tours.create_tournament(services, ADMIN, tours.TournamentSpec(
        title="Doomed", kind="round_robin", games=1, entrants=tuple(entrants), env_id=ENV))
    assert advance(services, tid) == 2 and advance(services, tid) == 0  # queued once, however often advanced
    queue = tournament_queue(services.redis, services.pool.keys)
    doomed = services.redis.lindex(queue.queue, 0).decode()
    # What MAX_ATTEMPTS services that died playing it leave (a thread cannot be SIGKILLed): its attempts.
    services.redis.hset(queue.record(doomed), "attempts", MAX_ATTEMPTS)
    worker = TournamentGames(services, poll_s=0.05, sweep_s=0.2).start()
    try:
        info = _wait_ended(services, tid)
    finally:
        worker.stop()
    assert info.state == "failed" and "round 1, table" in info.error and "3 times" in info.error
    assert queue.fields(doomed)["status"] == "failed"
    assert doomed not in {g.id for g in _games(services, tid)}  # never played
    assert advance(services, tid) == 0  # a failed tournament queues nothing more


def test_chosen_entrants_seeded_from_the_env_board(services):
    entrants = _field(services)[:4]
    mus = dict(zip(entrants, (20.0, 35.0, 25.0, 30.0), strict=True))  # the last entrant stays unrated
    services.sessions.write_transaction(lambda s: repo.upsert_ratings(s, [
        {"agent_id": a, "role": "player", "env_id": ENV, "mu": mu, "sigma": 1.0, "games": 9, "wins": 3, "draws": 3,
         "losses": 3, "last_match_seq": None} for a, mu in list(mus.items())[:3]]), what="ratings")
    spec = tours.TournamentSpec(title="Seeded", kind="single_elimination", games=1, entrants=tuple(entrants),
                                env_id=ENV, seed_from_board=True)
    tid = tours.create_tournament(services, ADMIN, spec)
    with services.sessions() as session:
        info, state, _ = tours.load(session, tid)
    assert info.entrants == [entrants[1], entrants[2], entrants[0], entrants[3]]
    assert [(p.pairing.a, p.pairing.b) for p in state.rounds[0]] == [(entrants[1], entrants[3]),
                                                                     (entrants[2], entrants[0])]
