"""The competition pages through TestClient: the list, a competition's page (safe rules,
countdowns, board, references, final standings), private ones 404 to non-members, and the
team forms of a signed-in person. A real app over a fresh SQLite database and its own Redis."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.storage.wiring import Services
from tests.web.competition_seed import SeededCompetitions, seed_competitions
from tests.web.test_accounts import form_token, fresh_services, session_csrf, sign_up


@pytest.fixture
def services(tmp_path: Path, redis_url: str) -> Iterator[Services]:
    yield from fresh_services(tmp_path, redis_url)


@pytest.fixture
def seeded(services: Services) -> SeededCompetitions:
    return seed_competitions(services)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as c:
        yield c


def test_the_list_shows_what_the_visitor_may_see(client: TestClient, seeded: SeededCompetitions) -> None:
    listing = client.get("/competitions").text
    assert "Spring cup" in listing and "Autumn cup" in listing and "Lab league" not in listing
    assert re.search(rf'data-competition="{seeded.finished}".*?archived', listing, re.DOTALL)
    assert re.search(rf'data-competition="{seeded.public}".*?<time class="countdown"', listing, re.DOTALL)
    for path in (f"/competitions/{seeded.private}", f"/api/v1/competitions/{seeded.private}"):
        assert client.get(path).status_code == 404, path  # invisible, not forbidden
    sign_up(client, "ivy")
    assert client.get(f"/competitions/{seeded.private}").status_code == 404  # signed in, not a member
    wrong = client.post("/competitions/join", data={"invite_code": "not-the-code", "csrf_token": session_csrf(client)})
    assert wrong.status_code == 400 and "no competition has that invite code" in wrong.text
    joined = client.post("/competitions/join", data={"invite_code": seeded.private_code,
                                                      "csrf_token": session_csrf(client)}, follow_redirects=False)
    assert joined.status_code == 303 and joined.headers["location"] == f"/competitions/{seeded.private}"
    assert "Lab league" in client.get("/competitions").text
    assert client.get(f"/competitions/{seeded.private}").status_code == 200


def test_the_competition_page(client: TestClient, seeded: SeededCompetitions) -> None:
    response = client.get(f"/competitions/{seeded.public}")
    assert response.status_code == 200
    html = response.text
    rules = re.search(r'<div class="rules" id="competition-rules">(.*?)</div>', html, re.DOTALL).group(1)
    assert "<h1>How to win</h1>" in rules and "<strong>reference agents</strong>" in rules and "<table>" in rules
    assert "<script>" not in rules and "&lt;script&gt;" in rules  # the HTML in the rules is shown, not run
    assert "javascript:" not in rules.replace("[a trap](javascript:", "")  # no javascript: link was made
    assert re.search(r'<time class="countdown" id="deadline-countdown" datetime="[^"]+"', html)
    board = re.search(r'<table id="competition-board".*?</table>', html, re.DOTALL).group(0)
    assert 'data-live="true"' in board
    rows = re.findall(r'<tr data-agent="(\d+)"', board)
    assert rows == [str(seeded.agents["heuristic"]), str(seeded.agents["random"])]  # best first
    assert "Owls" in board and '<span class="tag">reference</span>' in board
    assert re.search(r'id="reference-agents">.*?random', html, re.DOTALL)
    assert "Sign in</a> to form or join a team" in html
    assert client.get("/competitions/999999").status_code == 404


def test_a_person_forms_a_team_and_a_friend_joins_it_by_code(client: TestClient, services: Services,
                                                             seeded: SeededCompetitions) -> None:
    page = f"/competitions/{seeded.public}"
    sign_up(client, "jay")
    assert client.post(f"{page}/teams", data={"name": "Jays"}).status_code == 403  # no CSRF token
    made = client.post(f"{page}/teams", data={"name": "Jays", "csrf_token": session_csrf(client)},
                       follow_redirects=False)
    assert made.status_code == 303
    html = client.get(page).text
    assert '<strong id="my-team-name">Jays</strong>' in html
    assert re.search(r'id="submissions-left"><strong>5</strong> of 5 submissions left today', html)
    code = re.search(r'<code id="my-team-code">([^<]+)</code>', html).group(1)

    friend = TestClient(client.app)
    sign_up(friend, "kim")
    bad = friend.post(f"{page}/teams/join", data={"join_code": "owls-code-1x", "csrf_token": session_csrf(friend)})
    assert bad.status_code == 400 and "no team of this competition has that join code" in bad.text
    joined = friend.post(f"{page}/teams/join", data={"join_code": code, "csrf_token": session_csrf(friend)},
                         follow_redirects=False)
    assert joined.status_code == 303
    assert "jay, kim" in friend.get(page).text
    team = friend.get(f"/api/v1/competitions/{seeded.public}/quota").json()  # the API agrees, by the cookie
    assert (team["team"], team["left_today"]) == ("Jays", 5)
    again = friend.post(f"{page}/teams", data={"name": "Kims", "csrf_token": session_csrf(friend)})
    assert again.status_code == 409 and "already in a team" in again.text
    assert form_token(again.text)  # the page came back with its forms


def test_an_archived_competition_shows_its_frozen_standings(client: TestClient, seeded: SeededCompetitions) -> None:
    html = client.get(f"/competitions/{seeded.finished}").text
    assert 'id="competition-state">archived' in html
    standings = re.search(r'<table id="standings-table">.*?</table>', html, re.DOTALL).group(0)
    order = re.findall(r'<tr data-agent="(\d+)"', standings)
    assert order == [str(seeded.agents["heuristic"]), str(seeded.agents["heuristic:epsilon=0.5"])]
    assert "Hawks" in standings
    pairs = re.search(r'<table id="pairs-table">.*?</table>', html, re.DOTALL).group(0)
    assert 'class="pair-separated"' in pairs and "heuristic:epsilon=0.5" in pairs
    assert re.search(r'id="standings-status" class="certified">Certified', html)
    assert 'data-live="false"' in html  # the season board no longer polls
    assert f'href="/api/v1/competitions/{seeded.finished}/matches/export?final=true&amp;format=csv"' in html


def test_during_the_final_evaluation_its_board_is_live(client: TestClient, services: Services,
                                                      seeded: SeededCompetitions) -> None:
    from arena.storage.db.repositories import competitions as comp_repo

    def start_final(session: object) -> None:  # what the background service does at the deadline
        agents = [e.agent_id for e in comp_repo.entries(session, seeded.public, active=True)]
        comp_repo.freeze_entries(session, seeded.public, agents)
        comp_repo.update_competition(session, seeded.public, {"state": "final"})

    services.sessions.write_transaction(start_final, what="the deadline")
    html = client.get(f"/competitions/{seeded.public}").text
    final = re.search(r'<table id="final-board".*?</table>', html, re.DOTALL).group(0)
    assert 'data-live="true"' in final and "board?final=true" in final
    assert re.findall(r'<tr data-agent="(\d+)"', final) == [str(seeded.agents["heuristic"])]  # the frozen pool
    assert "0 matches played so far" in html
    season = re.search(r'<table id="competition-board".*?</table>', html, re.DOTALL).group(0)
    assert 'data-live="false"' in season and "Season board (frozen at the deadline)" in html


def test_the_team_forms_count_against_the_write_limits(tmp_path: Path, redis_url: str) -> None:
    for services in fresh_services(tmp_path, redis_url, writes_per_minute=1):
        seeded = seed_competitions(services)
        with TestClient(create_app(services)) as client:
            sign_up(client, "max")
            codes = []
            while 429 not in codes and len(codes) < 3:  # 1 a minute: the 2nd (3rd if a minute ended between)
                response = client.post(f"/competitions/{seeded.public}/teams/join",
                                       data={"join_code": "no-such-code", "csrf_token": session_csrf(client)})
                codes.append(response.status_code)
            assert codes[-1] == 429 and set(codes[:-1]) == {400} and len(codes) in (2, 3), codes
            assert "too many requests" in response.text and 'id="form-error"' in response.text
