"""The evaluation views in a real browser (Debian's chromium via Playwright): an agent's probe
followed live to its result, the exploitability column, the payoff page's rankings and
cycles, what the first move is worth, and the admin integrity view over a planted pair."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from arena.api.app import create_app
from arena.core.settings import Settings
from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService
from arena.storage.db import make_engine, session_factory, upgrade
from arena.storage.redis_server import EmbeddedRedis
from arena.storage.wiring import Services, open_services
from tests.client.live import LiveServer
from tests.evaluation.planted import C4, TTT, plant_board, plant_cycle
from tests.web.test_browser import CHROMIUM

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)", allow_module_level=True)

pytestmark = pytest.mark.browser
ADMIN = "admin-browser-token"


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """A database with the planted pair (connect four) and the planted cycle (tic-tac-toe)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('evaluation') / 'arena.sqlite3'}"
    upgrade(url)
    sessions = session_factory(make_engine(url))
    ids = plant_board(sessions) | {f"ttt:{k}": v for k, v in plant_cycle(sessions).items()}
    sessions.dispose()
    yield url, ids


@pytest.fixture(scope="module")
def services(boards, embedded_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path_factory.mktemp("evaluation-data"), database_url=boards[0],
                        redis_url=embedded_redis.url.rsplit("/", 1)[0] + "/0", admin_token=ADMIN,
                        probe_budget_steps=8192, probe_eval_games=20, probe_auto=False, probe_niceness=0)
    with open_services(settings) as opened:
        yield opened
        opened.sessions.dispose()


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[str]:
    live = LiveServer(create_app(services))
    yield live.url
    live.stop()


def test_a_probe_is_followed_live_on_the_agent_page_and_lands_on_the_leaderboard(page, server, services, boards):
    agent_id = boards[1]["random"]
    queued = httpx.post(f"{server}/api/v1/agents/{agent_id}/probes", json={"budget_env_steps": 0},
                        headers={"Authorization": f"Bearer {ADMIN}"})
    assert queued.status_code == 202, queued.text
    page.goto(f"{server}/agents/{agent_id}")
    row = page.locator(f"#probes tbody tr[data-probe='{queued.json()['id']}']")
    assert row.get_attribute("data-status") == "queued"
    assert "0 steps" in row.inner_text()
    page.evaluate("window.__sameDocument = true")
    probes = ProbeService(services, ProcessProbeBackend(), poll_s=0.1).start()
    try:
        page.wait_for_selector(f"#probes tbody tr[data-probe='{queued.json()['id']}'][data-status='done']",
                               timeout=240_000)
    finally:
        probes.stop()
    assert page.evaluate("window.__sameDocument") is True  # updated by the script, not a reload
    done = httpx.get(f"{server}/api/v1/agents/{agent_id}/probes").json()["data"][0]
    cells = page.locator(f"#probes tbody tr[data-probe='{done['id']}'] td").all_inner_texts()
    assert cells[4] == f"{100 * done['win_rate']:.1f}%"
    assert cells[5] == f"{100 * done['ci_low']:.1f}% – {100 * done['ci_high']:.1f}%"
    assert page.locator("#agent-seats tbody tr").count() == 2
    page.goto(f"{server}/envs/{C4}")
    probe_cell = page.locator(f"#leaderboard tr[data-agent='{agent_id}'] td.probe").inner_text()
    assert probe_cell.startswith(f"{100 * done['win_rate']:.0f}% [") and probe_cell.endswith("@0")
    assert "first mover scored" in page.locator("#first-move-value").inner_text()


def test_the_payoff_page_ranks_three_ways_and_shows_the_cycle(page, server, boards):
    ids = boards[1]
    page.goto(f"{server}/envs/{TTT}/payoff")
    assert page.locator("#rankings tbody tr").count() == 3
    assert page.locator("#rankings td.nash-rank").all_inner_texts() == ["1", "1", "1"]
    [cycle] = page.locator("#cycles li.cycle").all()
    text = cycle.inner_text()
    for name in ("rock", "paper", "scissors"):
        assert name in text
    assert float(cycle.locator(".confidence").inner_text().rstrip("%")) > 99.0
    hrefs = cycle.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert len(hrefs) == 4 and set(hrefs) == {f"/agents/{ids[f'ttt:{k}']}" for k in ("rock", "paper", "scissors")}
    page.goto(f"{server}/envs/{C4}/payoff?top=7")
    assert page.locator("#rankings tbody tr").count() == 7


def test_the_admin_view_lists_the_planted_pair_with_its_evidence(page, server, boards):
    page.goto(f"{server}/admin/integrity")
    page.fill("#admin-token", "not-the-token")
    page.select_option("#integrity-env", C4)
    page.click("#integrity-form button")
    page.wait_for_function("() => document.getElementById('integrity-status').textContent.includes('invalid')")
    page.fill("#admin-token", ADMIN)
    page.click("#integrity-form button")
    flags = page.locator("#integrity-pairs tbody tr.flag")
    flags.first.wait_for()
    assert flags.count() == 1
    cells = flags.first.locator("td").all_inner_texts()
    assert cells[0].startswith("partner") and cells[1].startswith("thrower") and cells[2] == "yes"
    assert "mallory" in cells[0]
    assert "880 rated matches" in page.locator("#integrity-status").inner_text()
    assert page.locator("#integrity-dependence tbody tr.flag").count() >= 1
