"""A person plays an agent in a real browser: the play page, the second client of the protocol.

Debian's chromium driven by Playwright (``browser`` and ``page`` fixtures of conftest)
over a live uvicorn server whose app runs the background service
(``create_app(services, start_background=True)``): the page opens the match with
``POST /agents/{id}/play``, speaks msgpack over the WebSocket, and the service plays the
match in its connected lane and records it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arena.core.settings import Settings
from arena.ladder.people import GUEST_DONE
from arena.ladder.registration import register_builtin_agents
from arena.storage.db import repositories as repo
from arena.storage.db import upgrade
from arena.storage.wiring import Services, open_services
from tests.api.helpers import RAISED_LIMITS, seed_ladder
from tests.connected.test_people import wait_for_match
from tests.web.test_browser import TIMEOUT_MS, sync_api  # noqa: F401 - skips without chromium/playwright
from tests.web.test_csp_browser import sign_up_in_browser

pytestmark = pytest.mark.browser

ENV = "tictactoe-v3"


@dataclass
class PlayServer:
    url: str
    services: Services
    agent_id: int


@pytest.fixture
def play_server(tmp_path: Path, redis_url: str) -> Iterator[PlayServer]:
    """A live server with the scheduler running (tictactoe only) and a rated heuristic agent."""
    from arena.api.app import create_app
    from tests.client.live import LiveServer

    database_url = f"sqlite+pysqlite:///{tmp_path / 'arena.sqlite3'}"
    upgrade(database_url)
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=database_url,
                        redis_url=redis_url, envs=ENV, probe_concurrency=0, **RAISED_LIMITS)
    with open_services(settings) as services:
        services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, ["heuristic", "random"]),
                                            what="builtins")
        ids = seed_ladder(services, ["heuristic", "random"], 20)
        server = LiveServer(create_app(services, start_background=True))
        try:
            yield PlayServer(server.url, services, ids["heuristic"])
        finally:
            server.stop()


def shown_board(page: object) -> list[int]:
    """The play page's squares in display order: 0 empty, else the seat's piece + 1."""
    return page.eval_on_selector_all(
        "#play-board button.cell",
        "cells => cells.map(c => c.classList.contains('p1') ? 1 : c.classList.contains('p2') ? 2 : 0)")


def test_a_person_plays_a_whole_game_of_tictactoe_in_the_browser(page: object, play_server: PlayServer) -> None:
    server, services = play_server.url, play_server.services
    page.goto(f"{server}/agents/{play_server.agent_id}")
    page.click("#play-link")
    page.wait_for_url(f"{server}/play/{play_server.agent_id}")
    page.check('input[name="seat"][value="1"]')  # the agent moves first: its move must show up
    page.click("#play-start")

    legal = page.locator("#play-board button.cell.legal")
    legal.first.wait_for()
    # The agent (seat 0, colour p1) has made its first move; the person (p2) none yet.
    assert page.locator("#play-board .cell.p1").count() == 1
    assert page.locator("#play-board .cell.p2").count() == 0
    assert page.locator("#play-board .cell.last").count() == 1
    assert legal.count() == 8 and "Your move" in page.locator("#play-status").inner_text()
    assert "in reserve" in page.locator("#play-time").inner_text()
    assert page.evaluate("localStorage.getItem('arena.token')") is None  # a guest: no token given
    first_position = shown_board(page)

    clicks = 0
    while True:
        page.wait_for_selector("#play-board button.cell.legal, #play-result:not([hidden])")
        if page.locator("#play-result").is_visible():
            break
        legal.first.click()
        clicks += 1
        assert clicks <= 5, "tictactoe lasts at most 4 moves of the second player"
    outcome = page.locator("#play-outcome").inner_text()
    assert outcome.split(".")[0] in ("You won!", "You lost", "Draw")
    replay = page.locator("#play-replay").get_attribute("href")
    match_id = replay.removeprefix("/matches/")

    stored = wait_for_match(services, match_id)
    assert not stored.rated and stored.termination == "normal"
    assert sum(1 for seat, _ in stored.actions if seat == 1) == clicks
    with services.sessions() as session:
        participants = repo.get_participants(session, stored.seq)
        human = repo.get_agent(session, participants[1].agent_id)
    assert [p.agent_id for p in participants] == [play_server.agent_id, human.id]
    assert human.kind == "human" and human.owner_id is None and human.name.startswith("guest-")
    deadline = time.monotonic() + 10
    while True:  # a guest's agent retires after its one game
        with services.sessions() as session:
            human = repo.get_agent(session, human.id)
        if human.status == "retired" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (human.status, human.status_reason) == ("retired", GUEST_DONE)

    # The page drew the final position from the recorded match: the same pieces as the replay.
    page.wait_for_function("(n) => document.querySelectorAll('#play-board .cell.p1, #play-board .cell.p2').length"
                           " === n", arg=len(stored.actions), timeout=TIMEOUT_MS)
    with urllib.request.urlopen(f"{server}/api/v1/matches/{match_id}/frames") as response:
        frames = json.loads(response.read())
    assert frames["kind"] == "board" and len(frames["frames"]) == len(stored.actions) + 1
    # Drawn from the request's obs, the agent's first move sits where the replay puts it.
    assert first_position == [v for line in frames["frames"][1] for v in line]
    assert shown_board(page) == [v for line in frames["frames"][-1] for v in line]

    page.click("#play-replay")
    page.wait_for_url(f"{server}/matches/{match_id}")
    assert page.locator("#board .cell.p1, #board .cell.p2").count() == len(stored.actions)
    assert page.locator(f'#seats a[href="/agents/{human.id}"]').count() == 1  # the person's seat links their agent


def test_a_signed_in_person_plays_through_the_session_without_a_token(page: object, play_server: PlayServer) -> None:
    server, services = play_server.url, play_server.services
    sign_up_in_browser(page, server, "hopper")

    page.goto(f"{server}/play/{play_server.agent_id}")
    assert page.locator("#play-token").count() == 0  # signed in: no token field
    assert "hopper" in page.locator("#play-as").inner_text()
    page.check('input[name="seat"][value="0"]')
    page.click("#play-start")
    legal = page.locator("#play-board button.cell.legal")
    while True:
        page.wait_for_selector("#play-board button.cell.legal, #play-result:not([hidden])")
        if page.locator("#play-result").is_visible():
            break
        legal.first.click()
    match_id = page.locator("#play-replay").get_attribute("href").removeprefix("/matches/")
    stored = wait_for_match(services, match_id)
    with services.sessions() as session:
        human = repo.get_agent(session, repo.get_participants(session, stored.seq)[0].agent_id)
        user = repo.get_user_by_name(session, "hopper")
    assert user is not None and human.kind == "human" and human.owner_id == user.id  # rated as hopper
    assert page.evaluate("Object.keys(localStorage).length + Object.keys(sessionStorage).length") == 0
