"""The tournament page in Chromium over a live server: linked from its competition's page, a
Swiss tournament's crosstable and standings fill in live while the service plays it (no
reload), and end equal to the API's (no CSP violation: the ``page`` fixture)."""

from __future__ import annotations

import httpx
import pytest

from arena.client.tournaments import points
from arena.competitions import service
from arena.competitions import tournaments as tours
from arena.competitions.tournament_games import TournamentGames, advance
from arena.ladder.registration import register_builtin_agents
from arena.storage.wiring import Services
from tests.web.competition_seed import ENV, SeededCompetitions
from tests.web.test_browser import sync_api  # noqa: F401 - skips without chromium/playwright
from tests.web.test_competition_browser import live  # noqa: F401 - the live server with seeded competitions

pytestmark = pytest.mark.browser
FIELD = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6", "random", "heuristic:epsilon=0.9"]


def test_a_swiss_crosstable_fills_in_live(page: object, live: tuple[str, Services, SeededCompetitions]) -> None:  # noqa: F811
    server, services, seeded = live
    ids = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, FIELD), what="builtins")
    entrants = [ids[n] for n in FIELD]
    tid = tours.create_tournament(services, service.Caller(None, "admin", True), tours.TournamentSpec(
        title="Swiss cup", kind="swiss", games=3, rounds=3, entrants=tuple(entrants), competition_id=seeded.public))
    advance(services, tid)  # round 1 queued; nobody plays it yet

    page.goto(f"{server}/competitions/{seeded.public}")
    page.click("#tournaments a")
    page.wait_for_url(f"{server}/tournaments/{tid}")
    assert page.locator("#tournament-state").inner_text() == "running"
    assert page.locator("#games-played").inner_text() == "0"
    assert page.locator("#crosstable tbody tr").count() == len(FIELD)
    assert page.locator("#crosstable td[data-against]").all_inner_texts() == [
        "—" if i == j else "" for i in range(len(FIELD)) for j in range(len(FIELD))]
    page.evaluate("window.__sameDocument = true")

    worker = TournamentGames(services, poll_s=0.05, sweep_s=0.2).start()
    try:
        page.wait_for_function("() => document.getElementById('tournament-state').textContent === 'finished'",
                               timeout=120_000)
    finally:
        worker.stop()
    assert page.evaluate("window.__sameDocument") is True  # filled in without a reload

    final = httpx.get(f"{server}/api/v1/tournaments/{tid}").json()
    assert final["state"] == "finished" and final["games_played"] == 3 * 2 * 3  # 3 rounds, 2 tables, best of 3
    assert page.locator("#games-played").inner_text() == str(final["games_played"])
    cross = {row["agent_id"]: {m["agent_id"]: m["points"] for m in row["against"]} for row in final["crosstable"]}
    expected = ["—" if a == b else " ".join(points(p) for p in cross[a].get(b, [])) for a in entrants for b in entrants]
    assert page.locator("#crosstable td[data-against]").all_inner_texts() == expected
    assert sum(text not in ("", "—") for text in expected) == 2 * 2 * 3  # 6 meetings, seen from both sides
    rows = page.locator("#standings tbody tr")
    assert [rows.nth(i).get_attribute("data-agent") for i in range(rows.count())] == [
        str(s["agent_id"]) for s in final["standings"]]
    leader = page.locator("#standings tbody tr").first.locator("td")
    assert leader.nth(2).inner_text() == points(final["standings"][0]["points"])
    assert page.locator("#rounds table.rounds-table").count() == 3
    assert "bye" in page.locator("#rounds").inner_text()  # five entrants: one sits out each round

