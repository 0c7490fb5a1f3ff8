"""The service's pacing: settled boards trickle, new agents wake them (simulated clock, exact counts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arena.core.agent_status import AgentStatus
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.pacing import PacingConfig, choose_lineups
from arena.ladder.registration import register_builtin_agents, register_env
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from league.ratings.book import RatingBook, Standing
from league.ratings.rating import Rating, RatingEnv
from league.scheduling.scheduler import Phase

ENV = "connect_four-v3"
AGENTS = ["heuristic", "heuristic:epsilon=0.3", "random"]


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        with svc.sessions.begin() as session:
            register_env(session, ENV)
            register_builtin_agents(session, ENV, AGENTS)
        yield svc


class Clock:
    """Simulated monotonic seconds: the service plans on it, so counts do not depend on speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _service(services, clock: Clock, pacing: PacingConfig) -> BackgroundService:
    # Same games every run; batches never sized by the measured (wall-clock) pace.
    config = ServiceConfig(envs=(ENV,), batch_size=256, max_rate=1e12, pacing=pacing, seed=0, round_s=1e9)
    return BackgroundService(services, InProcessRunner(), config, clock=clock)


def _settle(service: BackgroundService, clock: Clock, cap: int = 60) -> int:
    played = 0
    for _ in range(cap):
        n = service.step()
        played += n
        clock.now += 0.1
        if n == 0 and service.pacer.phase(ENV) == Phase.SETTLED:
            return played
    raise AssertionError(f"the board did not settle in {cap} rounds ({played} matches)")


def _games(services, key: str) -> int:
    with services.sessions() as session:
        rows = {r.key: r.rating.games for r in repo.board_rows(session, ENV, "player")}
    return rows.get(key, 0)


def test_a_settled_board_plays_only_the_trickle_and_a_new_agent_wakes_it(services):
    clock = Clock()
    service = _service(services, clock, PacingConfig(trickle_matches_per_s=1.0, trickle_batch=16))
    first = _settle(service, clock)
    assert first > 0
    # Settled: 200 simulated seconds at one match per second, in batches of 16.
    trickle = []
    for _ in range(400):
        trickle.append(service.step())
        clock.now += 0.5
    assert sum(trickle) <= 200 + 16
    assert sum(trickle) >= 200 - 16  # the trickle keeps going (maintenance)
    assert set(trickle) == {0, 16}
    assert service.pacer.phase(ENV) == Phase.SETTLED
    # A new agent wakes the board at once, and plays most of the next round.
    with services.sessions.begin() as session:
        register_builtin_agents(session, ENV, ["heuristic:epsilon=0.6"])
    woken = service.step()
    assert woken >= 16 and service.pacer.phase(ENV) == Phase.ACTIVE
    assert _games(services, "heuristic:epsilon=0.6") >= woken // 2
    _settle(service, clock)
    service.stop()


def test_without_settling_the_board_plays_flat_out(services):
    clock = Clock()
    service = _service(services, clock, PacingConfig(settle=False))
    assert [service.step() for _ in range(3)] == [256, 256, 256]
    service.stop()


def test_the_live_pair_choice_prefers_unsettled_agents():
    env = RatingEnv()
    book = RatingBook(env)
    keys = [f"settled-{i}" for i in range(6)]
    for i, key in enumerate(keys):
        book.standings[(key, "player")] = Standing(Rating(mu=10.0 + 3.0 * i, sigma=0.9), games=200)
    lineups = choose_lineups([*keys, "new"], ("player", "player"), book, 64, np.random.default_rng(0), env=env)
    with_new = sum("new" in lineup for lineup in lineups)
    assert with_new >= 48, lineups


def test_a_retirement_plays_one_check_burst_then_the_board_rests_again(services):
    clock = Clock()
    service = _service(services, clock, PacingConfig(trickle_matches_per_s=1.0, trickle_batch=16))
    _settle(service, clock)
    with services.sessions.begin() as session:
        agent = repo.get_agent_by_key(session, ENV, "heuristic:epsilon=0.3")
        assert repo.set_agent_status(session, agent.id, AgentStatus.RETIRED)
    burst = service.step()
    assert burst >= 16 and service.pacer.phase(ENV) == Phase.CHECK
    with services.sessions() as session:
        newest = repo.match_history(session, env_id=ENV, limit=burst).matches
    assert not any("heuristic:epsilon=0.3" in m.seats for m in newest)  # retired: off the board
    clock.now += 0.1
    assert service.step() == 0 and service.pacer.phase(ENV) == Phase.SETTLED
    service.stop()
