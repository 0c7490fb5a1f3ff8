"""A whole competition against a live arena (issue 28 item 10): the API served live, the background
service in a process of its own, SQLite, the embedded Redis, Chromium.

An admin makes ``olga`` an organizer; she creates a public competition with a short season
(:data:`SEASON_S` seconds, extended by her while the teams submit and the season is played, so no
step races the machine's speed) and a private one (a 404 to a non-member until they join by code).
Three teams join and submit: one over its daily quota and one after the deadline are refused
with a 4xx that says why, and nothing is stored. The service validates the entries and rates
them on the competition's own board; at the deadline it freezes the pool and plays the final
evaluation until it is certified; the standings freeze. ``arena competition verify`` (the real
CLI, a subprocess) recomputes them from the downloaded match log: equal. In Chromium the
competition page shows the countdown and the live board during the season, then the final
standings and their pairs; a Swiss tournament of the top three, played by the same service,
shows its crosstable, equal to the API's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from arena.client import ArenaClient
from arena.client.tournaments import points
from arena.competitions.rules import board_key, final_board_key
from arena.ladder.recorder import rebuild_ratings
from envs.registry import get_spec
from league.competitions.certification import FINAL_RATING_ENV
from tests.client.live import run_cli
from tests.competitions.end_to_end import ADMIN_TOKEN, ENV, entry, live_arena, post_entry, season_held_open, service
from tests.waiting import wait_for
from tests.web.test_browser import TIMEOUT_MS, sync_api  # noqa: F401 - skips without chromium/playwright

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SEASON_S = 5
"""From creation to the deadline, held open (:func:`season_held_open`, this its margin) while the teams submit
and the season board is played and shown: after that, the season ends at most about this long later (one
second more). The margin is a stall of five seconds of the holder's thread (50 of its polls in a row) at the
worst moment: far beyond a loaded machine's scheduling delays, and each second of it is waited out."""


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def test_a_competition_from_creation_to_verified_standings_in_the_browser(page: object, tmp_path: Path,
                                                                         redis_url: str) -> None:
    with live_arena(tmp_path, redis_url) as arena, service(arena):
        url = arena.url
        with ArenaClient(url, token="") as anonymous:
            tokens = {n: anonymous.create_user(n)["token"] for n in ("olga", "ann", "ben", "cat", "eve")}
        with ArenaClient(url, token=ADMIN_TOKEN) as admin:
            admin.request("PUT", "/competitions/organizers/olga")
        clients = {n: ArenaClient(url, token=t) for n, t in tokens.items()}
        try:
            _competition(arena, page, clients, tokens, tmp_path)
        finally:
            for client in clients.values():
                client.close()


def _competition(arena, page, clients: dict[str, ArenaClient], tokens: dict[str, str], tmp_path: Path) -> None:
    url, olga = arena.url, clients["olga"]
    now = datetime.now(UTC)
    deadline = now + timedelta(seconds=SEASON_S)
    cid = olga.create_competition({
        "env": ENV, "title": "Minute cup", "rules_md": "Beat **random**.", "opens_at": _iso(now - timedelta(minutes=1)),
        "deadline": _iso(deadline), "daily_submissions": 2, "active_entries": 1, "top_k": 2, "final_floor": 6,
        "tie_margin": 0.2, "final_match_budget": 3000, "reference_agents": ["random"]}, open_now=True)["id"]
    # Its organizer extends the deadline while the teams submit and the season is played and shown,
    # however slow the machine; then the season ends, at most SEASON_S later.
    with season_held_open(url, tokens["olga"], cid, SEASON_S) as season:
        private = olga.create_competition({
            "env": ENV, "title": "Lab league", "opens_at": _iso(now - timedelta(minutes=1)),
            "deadline": _iso(now + timedelta(hours=1)), "is_public": False}, open_now=True)
        assert private["invite_code"]  # shown to its organizer

        # The private competition: a 404 to a non-member (as if it did not exist), visible once joined.
        eve = httpx.get(f"{url}/api/v1/competitions/{private['id']}",
                        headers={"Authorization": f"Bearer {tokens['eve']}"})
        assert eve.status_code == 404
        assert httpx.get(f"{url}/api/v1/competitions/{private['id']}/board").status_code == 404
        assert [c["id"] for c in clients["eve"].competitions()["data"]] == [cid]
        clients["ann"].join_competition(private["id"], private["invite_code"])
        assert clients["ann"].competition(private["id"])["title"] == "Lab league"

        # Three teams; ben submits twice (only his latest is active), then once over the daily quota.
        for name in ("ann", "ben", "cat"):
            clients[name].create_team(cid, f"team-{name}")
        sent = {}
        for name, seed, strong in (("ann", 1, True), ("ben", 2, False), ("ben", 3, False), ("cat", 4, False)):
            response = post_entry(url, tokens[name], cid, *entry(seed, strong), f"{name}-{seed}")
            assert response.status_code == 201, response.text
            sent[(name, seed)] = response.json()["agent"]["id"]
        stored = arena.stored_agents()
        over = post_entry(url, tokens["ben"], cid, *entry(5), "ben-5")
        assert over.status_code == 429 and "used its 2 submissions of today" in over.json()["detail"], over.text
        assert int(over.headers["Retry-After"]) > 0
        assert arena.stored_agents() == stored and clients["ben"].quota(cid)["used_today"] == 2
        pool = sorted([sent[("ann", 1)], sent[("ben", 3)], sent[("cat", 4)]])

        # The season: validated, then rated on the competition's own board beside its reference agent.
        def season_rated():
            rows = clients["eve"].competition_board(cid)["data"]
            return rows if {r["agent_id"] for r in rows if r["games"] > 0} >= set(pool) else None
        rows = wait_for("the season board to rate the three active entries", season_rated, timeout_s=120)
        assert {r["agent_id"] for r in rows if not r["reference"]} == set(pool)
        assert [r["name"] for r in rows if r["reference"]] == ["random"]

        page.goto(f"{url}/competitions/{cid}")
        first = page.locator("#deadline-countdown").inner_text()  # it says how long is left, and ticks
        assert first.startswith("in "), first
        page.wait_for_function("(first) => document.getElementById('deadline-countdown').textContent !== first",
                               arg=first, timeout=TIMEOUT_MS)
        board = page.locator("#competition-board tbody tr[data-agent]")
        wait_for("the live board's rows", lambda: board.count() == 4, timeout_s=30)
        assert {board.nth(i).get_attribute("data-agent") for i in range(4)} == {str(r["agent_id"]) for r in rows}

    # The deadline: the service freezes the pool; a late submission is refused, nothing stored.
    assert season.deadline >= deadline  # extended or not, never brought forward
    wait_for("the deadline to pass", lambda: datetime.now(UTC) >= season.deadline, timeout_s=SEASON_S + 5,
             every_s=0.05)
    stored = arena.stored_agents()
    late = post_entry(url, tokens["cat"], cid, *entry(6), "cat-6")
    # The final evaluation may be over already (a few hundred quick games): then it says so instead.
    # tests/competitions/test_end_to_end.py submits during one held in progress: the deadline's message.
    assert late.status_code == 409, late.text
    assert "deadline of competition" in late.json()["detail"] or "is finished" in late.json()["detail"], late.text
    assert arena.stored_agents() == stored and len(olga.entries(cid)["data"]) == 4

    # The final evaluation runs to certification; the standings freeze.
    wait_for("the final evaluation to end", lambda: olga.competition(cid)["state"] == "finished", timeout_s=120)
    published = olga.standings(cid)
    result = published["result"]
    assert published["final"] and published["certified"] and result["stopped"] == "certified", result["stopped"]
    frozen = sorted(e["agent_id"] for e in olga.entries(cid)["data"] if e["frozen"])
    assert frozen == pool  # each team's latest entry; ben's first one and every refusal left out
    standings = result["standings"]
    assert sorted(s["entry"] for s in standings) == pool and [s["rank"] for s in standings] == [1, 2, 3]
    assert standings[0]["entry"] == sent[("ann", 1)]  # the strong entry wins
    for s in standings:
        assert s["rank_lo"] <= s["rank"] <= s["rank_hi"]
        assert s["games"] == s["wins"] + s["draws"] + s["losses"] >= 6  # the floor
    assert sum(s["games"] for s in standings) == 2 * result["matches"] == 2 * published["matches"]
    adjacent = [p for p in result["pairs"] if p["kind"] == "adjacent"]
    assert [(p["upper"], p["lower"]) for p in adjacent] == [(a["entry"], b["entry"])
                                                            for a, b in pairwise(standings)]
    assert all(p["status"] in ("separated", "tied") and p["confidence"] >= 0.95 for p in result["pairs"])
    assert adjacent[0]["status"] == "separated" and adjacent[0]["low"] > 0.5

    # Recomputed by the real CLI from the published match log: equal.
    home = tmp_path / "home"
    home.mkdir()
    verified = run_cli("competition", "verify", str(cid), home=home, server=url)
    assert verified.returncode == 0 and "equal" in verified.stdout and "NOT" not in verified.stdout, \
        verified.stdout + verified.stderr
    assert f"{result['matches']} matches" in verified.stdout
    for board in (board_key(cid), final_board_key(cid)):  # rebuilt from the match log == live
        env = FINAL_RATING_ENV if board == final_board_key(cid) else None
        assert rebuild_ratings(arena.services.sessions, get_spec(ENV), board=board, rating_env=env).equal

    # A Swiss tournament of the top three, played by the same service.
    tournament = olga.request("POST", "/tournaments", json={"title": "Minute Swiss", "kind": "swiss", "games": 1,
                                                            "rounds": 2, "competition_id": cid, "top": 3})
    def finished():
        now = olga.request("GET", f"/tournaments/{tournament['id']}")
        return now if now["state"] == "finished" else None
    played = wait_for("the Swiss tournament to finish", finished, timeout_s=60)
    assert {e["agent_id"] for e in tournament["entrants"]} == set(pool) and played["games_played"] == 2

    # The pages: the frozen standings and their pairs, the tournament's crosstable.
    page.goto(f"{url}/competitions/{cid}")
    assert page.locator("#standings-status").inner_text().startswith("Certified")
    rows_shown = page.locator("#standings-table tbody tr")
    assert [rows_shown.nth(i).get_attribute("data-agent") for i in range(rows_shown.count())] == \
        [str(s["entry"]) for s in standings]
    for i, s in enumerate(standings):  # rank and range, games, W / D / L as published
        cells = rows_shown.nth(i).locator("td")
        assert cells.nth(0).inner_text().split()[0] == str(s["rank"])
        assert cells.nth(4).inner_text() == str(s["games"])
        assert cells.nth(5).inner_text() == f"{s['wins']} / {s['draws']} / {s['losses']}"
    assert page.locator("#pairs-table tbody tr").count() == len(result["pairs"])
    assert page.locator("#pairs-table tr.pair-separated").count() == sum(p["status"] == "separated"
                                                                          for p in result["pairs"])
    assert olga.standings(cid)["result"] == result  # frozen: the tournament changed nothing
    page.click("#tournaments a")
    page.wait_for_url(f"{url}/tournaments/{tournament['id']}")
    assert page.locator("#tournament-state").inner_text() == "finished"
    entrants = [s["agent_id"] for s in played["standings"]]
    cross = {row["agent_id"]: {m["agent_id"]: m["points"] for m in row["against"]} for row in played["crosstable"]}
    order = [int(page.locator("#crosstable tbody tr").nth(i).get_attribute("data-agent"))
             for i in range(len(entrants))]
    expected = ["—" if a == b else " ".join(points(p) for p in cross[a].get(b, [])) for a in order for b in order]
    assert page.locator("#crosstable td[data-against]").all_inner_texts() == expected
