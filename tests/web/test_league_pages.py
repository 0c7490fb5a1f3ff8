"""The training league's page (strategy timeline) and hide-and-seek replays, through TestClient."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from arena.storage.db import repositories as repo
from arena.training.phases import timeline_rows
from league.evaluation.phases import PhaseTimeline
from tests.web.seed import HS, HideAndSeekArena, seed_hide_and_seek


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HideAndSeekArena]:
    """Four recorded hide-and-seek matches and a league timeline over them (overrides conftest's)."""
    arena = seed_hide_and_seek(f"sqlite:///{tmp_path_factory.mktemp('hs') / 'arena.sqlite3'}")
    yield arena
    arena.sessions.dispose()


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def test_league_page_shows_the_timeline_next_to_ratings(client: TestClient, seeded: HideAndSeekArena) -> None:
    page = client.get(f"/leagues/{seeded.league_id}")
    assert page.status_code == 200
    html = page.text
    assert 'id="phase-chart"' in html and 'id="league-rating-chart"' in html
    # One polyline per phase in the rate chart, one per role in the rating chart.
    rate_svg = html[html.index('id="phase-chart"'):html.index('id="league-rating-chart"')]
    assert [m for m in re.findall(r'data-name="(\w+)"', rate_svg)] == ["chasing", "fort"]
    rating_svg = html[html.index('id="league-rating-chart"'):html.index('id="phase-links"')]
    assert re.findall(r'data-name="(\w+)"', rating_svg) == ["hider", "seeker"]
    # The table: a row per generation with the rates as bars and mu +- sigma per role.
    table = html[html.index('id="phase-table"'):]
    assert table.count('<th scope="row" class="n">') == 4
    assert "26.00 ± 7.00" in table and "21.00 ± 4.00" in table  # hider g1, seeker g4
    fort_g4 = seeded.timeline.record(4).rates["fort"]
    assert f'aria-label="{100 * fort_g4:.1f}%"' in table


def test_each_phase_links_to_the_first_match_where_it_happened(client: TestClient,
                                                               seeded: HideAndSeekArena) -> None:
    html = client.get(f"/leagues/{seeded.league_id}").text
    links = html[html.index('id="phase-links"'):html.index('id="phase-table"')]
    firsts = seeded.timeline.firsts
    assert "chasing" in firsts  # the seeded matches include one where seekers see a hider throughout
    for phase in ("chasing", "fort"):
        item = re.search(rf'<li data-phase="{phase}">(.*?)</li>', links, re.DOTALL).group(1)
        if phase in firsts:
            assert f'href="/matches/{firsts[phase].match_id}"' in item
            assert f"generation {firsts[phase].generation}" in item
        else:
            assert "not in a recorded match yet" in item
    target = client.get(f"/matches/{firsts['chasing'].match_id}")
    assert target.status_code == 200 and 'id="hs-grid"' in target.text


def test_timeline_json_and_unknown_league(client: TestClient, seeded: HideAndSeekArena) -> None:
    data = client.get(f"/api/v1/leagues/{seeded.league_id}/timeline").json()
    assert data["env_id"] == HS and data["phases"] == ["chasing", "fort"] and data["roles"] == ["hider", "seeker"]
    assert [r["generation"] for r in data["rows"]] == [1, 2, 3, 4]
    assert [r["episodes"] for r in data["rows"]] == [1, 1, 100, 100]
    assert data["rows"][3]["rates"]["fort"] == pytest.approx(seeded.timeline.record(4).rates["fort"])
    assert {f["phase"]: f["match_id"] for f in data["firsts"]} == {
        p: f.match_id for p, f in seeded.timeline.firsts.items()}
    assert client.get("/api/v1/leagues/999/timeline").status_code == 404
    assert client.get(f"/api/v1/leagues/{2**40}/timeline").status_code == 422  # ids are 32-bit
    assert client.get("/leagues/999").status_code == 404
    board = client.get(f"/envs/{HS}").text
    assert f'href="/leagues/{seeded.league_id}"' in board  # the env's leaderboard links its leagues


def test_hide_and_seek_match_page_embeds_the_grid_frames(client: TestClient, seeded: HideAndSeekArena) -> None:
    match_id = seeded.match_ids[0]
    html = client.get(f"/matches/{match_id}").text
    assert re.search(r'<script nonce="[^"]+" src="/static/hide_and_seek.js" defer></script>', html)
    frames = json.loads(re.search(r'<script type="application/json" id="frames-data">(.*?)</script>',
                                  html, re.DOTALL).group(1))
    assert frames == client.get(f"/api/v1/matches/{match_id}/frames").json()
    assert frames["kind"] == "grid" and len(frames["frames"]) == 61
    walls = sum(row.count("#") for row in frames["walls"])
    assert html.count('class="hs-wall"') == walls
    assert 'id="scrub" min="0" max="60"' in html and 'id="hs-phase"' in html
    script = client.get("/static/hide_and_seek.js")
    assert script.status_code == 200 and "ArenaGrid" in script.text


def test_exploiters_have_their_own_table_apart_from_the_mains(client: TestClient, seeded: HideAndSeekArena) -> None:
    """A league with exploiters: per generation each one's score and edge, frozen (as which
    snapshot) and reset marked; a league without them (``hs-demo``) has no such section."""
    timeline = PhaseTimeline()
    for gen in (0, 1, 2):
        timeline.set_rating(gen, "hider", 25.0 + gen, 8.0)
    timeline.set_exploiters(1, [{"role": "seeker", "index": 0, "score": 0.25, "edge": -0.5, "snapshot": None,
                                 "reset": True},
                                {"role": "hider", "index": 0, "score": 0.75, "edge": 0.25, "snapshot": "x0",
                                 "reset": False}])
    timeline.set_exploiters(2, [{"role": "hider", "index": 1, "score": 0.5, "edge": 0.0625, "snapshot": None,
                                 "reset": False}])
    with seeded.sessions.begin() as session:
        league_id = repo.create_league(session, "hs-exploited", HS, {})
        repo.replace_generations(session, league_id, timeline_rows(timeline))

    html = client.get(f"/leagues/{league_id}").text
    assert html.index('id="phase-table"') < html.index('id="exploiters"')
    mains = html[html.index('id="phase-table"'):html.index('id="exploiters"')]
    assert mains.count('<th scope="row" class="n">') == 3 and "frozen" not in mains  # the mains' rows alone
    section = html[html.index('id="exploiters"'):]
    # a column per exploiter, hiders first; a row per generation with exploiters
    assert re.findall(r'data-exploiter="([\w-]+)"', section) == ["hider-0", "hider-1", "seeker-0"]
    rows = re.findall(r'<th scope="row" class="n">(\d+)</th>(.*?)</tr>', section, re.DOTALL)
    assert [g for g, _ in rows] == ["1", "2"]
    cells = {g: re.findall(r'<td class="rate-cell">(.*?)</td>', body, re.DOTALL) for g, body in rows}
    assert "0.75</span>" in cells["1"][0] and "(+0.25)" in cells["1"][0] and "frozen as x0" in cells["1"][0]
    assert cells["1"][1] == "—"  # hider 1 played no generation 1
    assert "(-0.50)" in cells["1"][2] and 'class="tag reset"' in cells["1"][2] and "frozen" not in cells["1"][2]
    assert "(+0.06)" in cells["2"][1] and "tag" not in cells["2"][1] and cells["2"][2] == "—"

    data = client.get(f"/api/v1/leagues/{league_id}/timeline").json()
    assert [(e["generation"], e["role"], e["index"], e["snapshot"], e["reset"]) for e in data["exploiters"]] == [
        (1, "seeker", 0, None, True), (1, "hider", 0, "x0", False), (2, "hider", 1, None, False)]
    assert data["exploiters"][2]["edge"] == 0.0625 and [r["generation"] for r in data["rows"]] == [0, 1, 2]

    plain = client.get(f"/leagues/{seeded.league_id}").text
    assert 'id="phase-table"' in plain and 'id="exploiters"' not in plain
    assert client.get(f"/api/v1/leagues/{seeded.league_id}/timeline").json()["exploiters"] == []
