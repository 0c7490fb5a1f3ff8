"""The pages in a real browser: Debian's chromium driven by Playwright over a real server.

A uvicorn server runs in a background thread on a free loopback port over a seeded
SQLite database; the tests load pages, play more matches into the database while a
page is open, and check what the scripts did to the DOM. Playwright only drives the
system browser (``/usr/bin/chromium``); it never downloads one.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi import FastAPI

from arena.read.pages import MAX_CHART_POINTS
from arena.storage.db import repositories as repo
from tests.web.seed import C4, SeededArena

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TIMEOUT_MS = 15_000

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is not installed")


@pytest.fixture(scope="module")
def server(app: FastAPI) -> Iterator[str]:
    """Base URL of a uvicorn server for the seeded arena, in a background thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # a free port, held until the server takes the socket over
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)
    sock.close()


def _distinct_colors(png: bytes) -> int:
    """Distinct colours in a PNG (decoded with pygame, an Arena dependency)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    pixels = pygame.surfarray.array3d(pygame.image.load(io.BytesIO(png), "shot.png"))
    return len(np.unique(pixels.reshape(-1, 3), axis=0))


def test_leaderboard_updates_live_without_reload(page: object, server: str, seeded: SeededArena) -> None:
    page.goto(f"{server}/envs/{C4}")
    rows = page.locator("#leaderboard tbody tr[data-agent]")
    assert rows.count() == 4
    assert rows.first.locator("td.agent a").inner_text() == "heuristic"
    games_before = sum(int(g) for g in page.eval_on_selector_all(
        "#leaderboard tbody tr[data-agent]", "trs => trs.map(tr => tr.dataset.games)"))
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    assert seeded.play(C4, 200) == 200  # two batches, two commits
    # One in-page check, so a later poll cannot clear the highlight in between: every
    # match adds a game to two agents, and the rows of agents that played flash.
    page.wait_for_function(
        """target => {
            const trs = [...document.querySelectorAll('#leaderboard tbody tr[data-agent]')];
            const games = trs.reduce((s, tr) => s + Number(tr.dataset.games), 0);
            return games === target && trs.filter(tr => tr.classList.contains('changed')).length >= 2;
        }""",
        arg=games_before + 2 * 200, timeout=TIMEOUT_MS)
    assert page.evaluate("window.__sameDocument") is True
    with seeded.sessions() as session:
        board = repo.board_rows(session, C4, "player")
    shown_mu = page.eval_on_selector_all("#leaderboard tbody tr[data-agent]",
                                         "trs => trs.map(tr => tr.children[3].textContent)")
    assert shown_mu == [f"{r.rating.mu:.2f}" for r in board]
    assert "Live" in page.locator("#live-status").inner_text()


def test_agent_page_draws_the_rating_chart(page: object, server: str, seeded: SeededArena) -> None:
    with seeded.sessions() as session:
        agent = repo.get_agent_by_key(session, C4, "heuristic:epsilon=0.5")
        games = repo.load_ratings(session, [agent.id])[(agent.id, "player")].games
    page.goto(f"{server}/agents/{agent.id}")
    mu = page.locator("#rating-chart path.mu")
    mu.wait_for()
    d = mu.get_attribute("d")
    points = [tuple(map(float, p.split(","))) for p in d.replace("M", "L").split("L") if p.strip()]
    assert len(points) == min(games, MAX_CHART_POINTS)  # long histories are thinned
    xs, ys = zip(*points)
    assert max(xs) - min(xs) > 400 and max(ys) - min(ys) > 20  # spans the plot, not a dot
    assert page.locator("#rating-chart path.band").count() == 1
    box = page.locator("#rating-chart").bounding_box()
    assert box["width"] > 400 and box["height"] > 150
    assert page.locator("#head-to-head tbody tr").count() >= 2
    page.locator("#agent-matches a").first.click()
    page.wait_for_url(f"{server}/matches/*")
    assert page.locator("#replay").count() == 1


def test_replay_steps_forward_and_back(page: object, server: str, seeded: SeededArena, tmp_path: Path) -> None:
    with seeded.sessions() as session:
        match = next(m for m in repo.match_history(session, env_id=C4, limit=100).matches
                     if m.termination == "normal" and len(m.actions) >= 10)
    page.goto(f"{server}/matches/{match.id}")
    discs = page.locator("#board .cell.p1, #board .cell.p2")
    assert discs.count() == len(match.actions)  # opens on the final position
    page.click("#btn-first")
    assert discs.count() == 0
    counts = []
    for _ in range(3):
        page.click("#btn-next")
        counts.append(discs.count())
    assert counts == [1, 2, 3]
    page.keyboard.press("ArrowRight")
    assert discs.count() == 4 and page.locator("#scrub").input_value() == "4"
    page.keyboard.press("ArrowLeft")
    assert discs.count() == 3
    page.click("#btn-prev")
    assert discs.count() == 2
    first_move = match.actions[0][1]
    assert page.locator("#board .cell.p1").count() == 1
    assert page.locator("#board .cell").nth(5 * 7 + first_move).get_attribute("class").startswith("cell p1")
    page.locator("#scrub").fill("7")
    assert discs.count() == 7 and page.locator("#step-label").inner_text() == f"7 / {len(match.actions)}"
    page.keyboard.press("End")
    assert discs.count() == len(match.actions)
    if match.winner is not None:  # the winning four light up on the final position
        assert page.locator(f"#board .cell.win.p{match.winner + 1}").count() >= 4
    shot = page.screenshot(full_page=True)
    (tmp_path / "replay.png").write_bytes(shot)
    assert len(shot) > 20_000 and _distinct_colors(shot) > 50


def test_simple_tag_replay_moves_the_particles(page: object, server: str, seeded: SeededArena) -> None:
    page.goto(f"{server}/matches/{seeded.tag_match_id}")
    prey = page.locator('#world circle[data-name="agent_0"]')
    end = (prey.get_attribute("cx"), prey.get_attribute("cy"))
    page.click("#btn-first")
    start = (prey.get_attribute("cx"), prey.get_attribute("cy"))
    assert start != end
    page.click("#btn-next")
    page.click("#btn-next")  # mpe2 integrates position before velocity: step 1 stays put
    assert page.locator("#step-label").inner_text() == "2 / 25"
    assert (prey.get_attribute("cx"), prey.get_attribute("cy")) != start
    assert page.locator("#world polyline.trail").count() == 4  # predators and prey leave trails
    assert page.locator("#world circle.entity").count() == 6


def _offline(page: object) -> list[str]:
    """Abort every request that leaves the machine; returns the list of the ones tried."""
    tried: list[str] = []

    def route(r: object) -> None:
        host = r.request.url.split("/")[2].rsplit(":", 1)[0]
        if host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            tried.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return tried


def test_api_docs_work_offline(page: object, server: str) -> None:
    """Swagger UI and ReDoc come from the package: with the network blocked /docs lists the
    endpoints and /redoc renders them. The only remote URL either page asks for is ReDoc's
    own small "by Redocly" logo, which hides itself when it cannot load."""
    tried = _offline(page)
    page.goto(f"{server}/docs")
    page.locator(".opblock").first.wait_for()
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    for path in ("/api/v1/users", "/api/v1/agents", "/api/v1/leaderboard", "/api/v1/challenges"):
        assert any(p.replace("\u200b", "") == path for p in paths), (path, paths)
    page.locator(".opblock-summary-path", has_text="/api/v1/leaderboard").first.click()
    page.locator(".opblock-body .parameters").first.wait_for()  # expanding an operation works too

    page.goto(f"{server}/redoc")
    page.locator("h1", has_text="Arena").first.wait_for()
    assert page.locator("[data-section-id^='tag/']").count() >= 4
    assert page.locator("h2", has_text="Create User").count() == 1  # an operation, rendered
    assert set(tried) <= {"https://cdn.redoc.ly/redoc/logo-mini.svg"}, tried
