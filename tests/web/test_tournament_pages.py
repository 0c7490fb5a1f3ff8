"""The tournament page through TestClient: a single elimination's bracket (byes to the top
seeds, the winners through to the final) rendered from the games the worker played, the
competition's page linking it, and a private competition's tournament a 404 page to outsiders."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.competitions import service
from arena.competitions import tournaments as tours
from arena.competitions.tournament_games import TournamentGames, advance
from arena.ladder.registration import register_builtin_agents
from arena.storage.db.repositories import tournaments as tour_repo
from arena.storage.wiring import Services
from tests.waiting import wait_for
from tests.web.competition_seed import ENV, seed_competitions
from tests.web.test_accounts import fresh_services

ADMIN = service.Caller(None, "admin", True)
FIELD = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6", "random", "heuristic:epsilon=0.9"]


@pytest.fixture
def services(tmp_path: Path, redis_url: str) -> Iterator[Services]:
    yield from fresh_services(tmp_path, redis_url)


def _played(services: Services, tid: int) -> None:
    advance(services, tid)
    worker = TournamentGames(services, poll_s=0.05, sweep_s=0.1).start()
    def ended() -> bool:
        with services.sessions() as session:
            return tour_repo.get_tournament(session, tid).state != "running"
    try:  # the worker's own loop ends it; wait for the row to say so
        wait_for(f"tournament {tid} to end", ended, timeout_s=120, every_s=0.05)
    finally:
        worker.stop()


def test_an_elimination_bracket_and_the_links(services: Services) -> None:
    seeded = seed_competitions(services)
    ids = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, FIELD), what="builtins")
    entrants = [ids[n] for n in FIELD]
    tid = tours.create_tournament(services, ADMIN, tours.TournamentSpec(
        title="Knockout", kind="single_elimination", games=3, entrants=tuple(entrants), competition_id=seeded.public))
    private = tours.create_tournament(services, ADMIN, tours.TournamentSpec(
        title="Closed", kind="round_robin", games=1, entrants=tuple(entrants[:3]), competition_id=seeded.private))
    with TestClient(create_app(services)) as client:
        running = client.get(f"/tournaments/{tid}")
        assert running.status_code == 200 and 'data-live="true"' in running.text
        assert f'href="/tournaments/{tid}"' in client.get(f"/competitions/{seeded.public}").text
        assert client.get(f"/tournaments/{private}").status_code == 404
        assert client.get("/tournaments/999999").status_code == 404

        _played(services, tid)
        html = client.get(f"/tournaments/{tid}").text
        body = client.get(f"/api/v1/tournaments/{tid}").json()
    assert body["state"] == "finished" and 'data-live="false"' in html
    assert len(body["rounds"]) == 3 and html.count('class="bracket-round"') == 3
    # Eight slots for five: seeds 1-3 get the byes of round one, seed 4 meets seed 5.
    first = body["rounds"][0]["tables"]
    assert sorted((t["a"], t["b"]) for t in first if t["b"] is None) == sorted((e, None) for e in entrants[:3])
    assert [(t["a"], t["b"]) for t in first if t["b"] is not None] == [(entrants[3], entrants[4])]
    assert html.count('<span class="muted">bye</span>') == 3
    champion = body["standings"][0]
    final = body["rounds"][-1]["tables"][0]
    assert champion["agent_id"] in (final["a"], final["b"]) and champion["tiebreak"] == 4.0
    winners = re.findall(r'class="bracket-side winner"><span class="seed">(\d+)</span>', html)
    assert len(winners) == 1 + 2 + 1  # every mini-match played (the byes have no winner's mark)
    assert str(entrants.index(champion["agent_id"]) + 1) == winners[-1]
