"""Hide and seek in a real browser: the replay viewer and the league's strategy timeline.

Debian's chromium driven by Playwright, over a uvicorn server on a database with recorded
hide-and-seek matches and a league timeline (``tests.web.seed.seed_hide_and_seek``); the
server, browser and page fixtures are the ones of ``tests/web/test_browser.py``.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from tests.web.seed import HideAndSeekArena, seed_hide_and_seek
from tests.web.test_browser import server  # noqa: F401 - the shared server fixture (browser, page: conftest)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HideAndSeekArena]:
    """Four recorded hide-and-seek matches and a league timeline over them (overrides conftest's)."""
    arena = seed_hide_and_seek(f"sqlite:///{tmp_path_factory.mktemp('hs-browser') / 'arena.sqlite3'}")
    yield arena
    arena.sessions.dispose()


def frames_of(server: str, match_id: str) -> dict:  # noqa: F811 - server is the base URL here
    with urllib.request.urlopen(f"{server}/api/v1/matches/{match_id}/frames") as response:
        return json.loads(response.read())


def agent_cells(pg: object) -> list[tuple[float, float]]:
    """``(row, col)`` of each drawn agent, in seat order, from the circles' centres."""
    out = []
    for seat in range(4):
        circle = pg.locator(f'#hs-grid g.hs-agent[data-seat="{seat}"] circle')
        out.append((float(circle.get_attribute("cy")) - 0.5, float(circle.get_attribute("cx")) - 0.5))
    return out


def test_viewer_draws_the_grid_and_the_slider_changes_the_frame(page: object, server: str,  # noqa: F811
                                                                seeded: HideAndSeekArena) -> None:
    match_id = seeded.match_ids[0]
    data = frames_of(server, match_id)
    page.goto(f"{server}/matches/{match_id}")
    walls = sum(row.count("#") for row in data["walls"])
    assert page.locator("#hs-grid rect.hs-wall").count() == walls
    assert page.locator("#hs-grid rect.hs-door").count() == len(data["doors"])
    assert page.locator("#hs-grid g.hs-agent").count() == 4
    assert page.locator("#hs-grid g.hs-agent.team-hiders").count() == 2
    assert page.locator("#hs-grid g.hs-box").count() == 2
    assert page.locator("#step-label").inner_text() == "60 / 60"

    page.locator("#scrub").fill("0")
    assert page.locator("#step-label").inner_text() == "0 / 60"
    assert "Preparation" in page.locator("#hs-phase").inner_text()
    assert page.locator("#hs-phase").get_attribute("class") == "hs-phase prep"
    assert "prep" in page.locator("#hs-grid").get_attribute("class").split()  # seekers drawn frozen
    start = [(a["row"], a["col"]) for a in data["frames"][0]["agents"]]
    assert agent_cells(page) == start

    k = next(i for i, f in enumerate(data["frames"]) if not f["prep"] and f["sight"])
    page.locator("#scrub").fill(str(k))
    assert agent_cells(page) == [(a["row"], a["col"]) for a in data["frames"][k]["agents"]]
    assert page.locator("#hs-grid line.hs-sight").count() == len(data["frames"][k]["sight"])
    assert "a seeker sees a hider" in page.locator("#hs-phase").inner_text()
    assert "prep" not in page.locator("#hs-grid").get_attribute("class").split()
    assert page.locator("#hs-grid g.hs-agent.seen").count() == len({h for _, h in data["frames"][k]["sight"]})

    # Locks: a box locked by the hiders shows the seat that locked it.
    j = next(i for i, f in enumerate(data["frames"]) if any(b["lock"] for b in f["boxes"]))
    box = next(b for b in data["frames"][j]["boxes"] if b["lock"])
    page.locator("#scrub").fill(str(j))
    locked = page.locator(f'#hs-grid g.hs-box.locked.lock-{box["lock"]}[data-id="{box["id"]}"]')
    assert locked.count() == 1 and locked.locator("text").text_content() == f"L{box['locked_by']}"

    # Play runs the steps forward; pause stops them.
    page.click("#btn-first")
    page.click("#btn-play")
    page.wait_for_function("() => document.getElementById('scrub').value >= 3")  # a function: the CSP forbids eval
    page.click("#btn-play")
    stopped = page.locator("#scrub").input_value()
    page.wait_for_timeout(600)
    assert page.locator("#scrub").input_value() == stopped and int(stopped) >= 3
    assert agent_cells(page) == [(a["row"], a["col"]) for a in data["frames"][int(stopped)]["agents"]]


def test_league_page_shows_the_timeline_and_links_to_first_replays(page: object, server: str,  # noqa: F811
                                                                   seeded: HideAndSeekArena) -> None:
    page.goto(f"{server}/leagues/{seeded.league_id}")
    assert page.locator("#phase-chart g.series").count() == 2
    assert page.locator("#league-rating-chart g.series").count() == 2
    box = page.locator("#phase-chart").bounding_box()
    assert box["width"] > 200 and box["height"] > 60  # drawn, not collapsed
    assert page.locator('#phase-chart g.series[data-name="chasing"] circle.dot').count() == 4
    assert page.locator("#phase-table tbody tr").count() == 4
    first = seeded.timeline.firsts["chasing"]
    link = page.locator('#phase-links li[data-phase="chasing"] a')
    assert link.get_attribute("href") == f"/matches/{first.match_id}"
    assert page.locator('#phase-links li[data-phase="fort"] a').count() == 0
    link.click()
    page.wait_for_url(f"**/matches/{first.match_id}")
    assert page.locator("#hs-grid g.hs-agent").count() == 4
