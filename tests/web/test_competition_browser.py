"""The competition pages in Chromium over a live server: the countdown ticks, the live board
follows the competition's ratings without a reload, the archived standings show, and a
signed-in person creates a team through the page (no CSP violation anywhere: ``page`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.api import create_app
from arena.competitions.rules import board_key
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from tests.web.competition_seed import ENV, SeededCompetitions, seed_competitions
from tests.web.test_accounts import fresh_services
from tests.web.test_browser import TIMEOUT_MS, sync_api  # noqa: F401 - skips without chromium/playwright
from tests.web.test_csp_browser import sign_up_in_browser

pytestmark = pytest.mark.browser


@pytest.fixture
def live(tmp_path: Path, redis_url: str) -> Iterator[tuple[str, Services, SeededCompetitions]]:
    from tests.client.live import LiveServer

    for services in fresh_services(tmp_path, redis_url):
        seeded = seed_competitions(services)
        server = LiveServer(create_app(services))
        try:
            yield server.url, services, seeded
        finally:
            server.stop()


def test_countdown_live_board_standings_and_a_team(page: object,
                                                   live: tuple[str, Services, SeededCompetitions]) -> None:
    server, services, seeded = live
    page.goto(f"{server}/competitions")
    page.click("text=Spring cup")
    page.wait_for_url(f"{server}/competitions/{seeded.public}")

    countdown = page.locator("#deadline-countdown")
    first = countdown.inner_text()
    assert first.startswith("in 2 d 0")  # the deadline is 2 days 3 hours away
    # Functions, not expression strings: Playwright evals those, which the pages' CSP forbids.
    page.wait_for_function("(first) => document.getElementById('deadline-countdown').textContent !== first",
                           arg=first, timeout=TIMEOUT_MS)  # it ticks
    assert countdown.inner_text().startswith("in 2 d 0")

    rows = page.locator("#competition-board tbody tr[data-agent]")
    assert [rows.nth(i).get_attribute("data-agent") for i in range(rows.count())] == \
        [str(seeded.agents["heuristic"]), str(seeded.agents["random"])]
    assert "reference" in rows.nth(1).inner_text()
    # The season moves on: the reference agent overtakes; the open page follows without a reload.
    page.evaluate("window.__sameDocument = true")
    services.sessions.write_transaction(lambda s: comp_repo.upsert_board_ratings(s, board_key(seeded.public), [
        {"agent_id": seeded.agents["random"], "role": "player", "env_id": ENV, "mu": 35.0, "sigma": 1.0,
         "games": 90, "wins": 70, "draws": 0, "losses": 20, "last_match_seq": None}]), what="new ratings")
    page.wait_for_function("(id) => document.querySelector('#competition-board tbody tr').dataset.agent === id",
                           arg=str(seeded.agents["random"]), timeout=TIMEOUT_MS)
    assert page.evaluate("window.__sameDocument") is True

    page.goto(f"{server}/competitions/{seeded.finished}")
    assert "Certified" in page.locator("#standings-status").inner_text()
    standings = page.locator("#standings-table tbody tr")
    assert standings.count() == 2 and standings.first.locator("td").nth(1).inner_text() == "heuristic"
    assert page.locator("#pairs-table tr.pair-separated").count() == 1

    sign_up_in_browser(page, server, "lee")
    page.goto(f"{server}/competitions/{seeded.public}")
    page.fill("#team-name", "Lees")
    page.click("#create-team-form button")
    page.wait_for_url(f"{server}/competitions/{seeded.public}#my-team")
    assert page.locator("#my-team-name").inner_text() == "Lees"
    assert "5 of 5 submissions left today" in page.locator("#submissions-left").inner_text()
    assert page.locator("#submissions-left time.countdown").inner_text().startswith("in ")
