"""Clone fingerprints in a real browser (Debian's chromium via Playwright): an agent's page lists
its versions, and the admin integrity view flags another owner's noisy copy with its evidence."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest

from agents.checkpoint import serialize_weights
from arena.api.app import create_app
from arena.core.settings import Settings
from arena.storage.redis_server import EmbeddedRedis
from arena.storage.wiring import open_services
from tests.api.test_clones import random_init, with_noise, worker_of
from tests.client.live import LiveServer
from tests.web.test_browser import CHROMIUM

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)", allow_module_level=True)

pytestmark = pytest.mark.browser
ADMIN = "admin-clones-token"
ENV = "tictactoe-v3"


@pytest.fixture(scope="module")
def server(embedded_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A live server where alice submitted an agent and a noisy copy of it, and bob another copy
    (``url``, ``ids`` by name, ``services``, ``upload(user, name, weights)``)."""
    data = tmp_path_factory.mktemp("clones")
    settings = Settings(page_cache_s=0.0, data_dir=data, database_url=f"sqlite:///{data / 'arena.sqlite3'}",
                        redis_url=embedded_redis.url.rsplit("/", 1)[0] + "/0", admin_token=ADMIN, probe_auto=False)
    with open_services(settings) as services:
        live = LiveServer(create_app(services))
        state, spec = random_init(0)
        tokens = {user: httpx.post(f"{live.url}/api/v1/users", json={"name": user}).json()["token"]
                  for user in ("alice", "bob")}
        ids = {}

        def submit(user: str, name: str, weights) -> int:
            files = [("weights", ("agent.safetensors", serialize_weights(weights), "application/octet-stream")),
                     ("spec", (None, spec)), ("env", (None, ENV)), ("name", (None, name))]
            response = httpx.post(f"{live.url}/api/v1/agents", files=files,
                                  headers={"Authorization": f"Bearer {tokens[user]}"})
            assert response.status_code == 201, response.text
            ids[name] = response.json()["id"]
            return ids[name]

        submit("alice", "original", state)
        submit("alice", "second-version", with_noise(state, 1e-4, 1))
        submit("bob", "bobs-copy", with_noise(state, 1e-4, 2))
        for agent_id in ids.values():  # a read queues the fingerprints; the background's worker computes them
            assert httpx.get(f"{live.url}/api/v1/agents/{agent_id}/family").status_code == 202
        assert worker_of(services).drain() == 3
        yield SimpleNamespace(url=live.url, ids=ids, services=services, submit=submit, state=state)
        live.stop()
        services.sessions.dispose()


def test_the_agent_page_lists_its_versions(page, server):
    url, ids = server.url, server.ids
    page.goto(f"{url}/agents/{ids['original']}")
    rows = page.locator("#family tbody tr:not(.empty)")
    rows.first.wait_for()
    assert rows.count() == 2
    first, second = (rows.nth(i).locator("th, td").all_inner_texts() for i in range(2))
    assert first[0] == "original (this agent)" and second[0] == "second-version"
    assert second[3] == "100.0%"
    page.goto(f"{url}/agents/{ids['bobs-copy']}")
    page.wait_for_function("() => document.querySelector('#family tbody').textContent.includes('No version')")


def test_the_admin_view_flags_the_other_owners_copy(page, server):
    url = server.url
    page.goto(f"{url}/admin/integrity")
    page.fill("#admin-token", ADMIN)
    page.select_option("#integrity-env", ENV)
    page.click("#integrity-form button")
    flags = page.locator("#integrity-clones tbody tr.flag")
    flags.first.wait_for()
    assert flags.count() == 2  # bob's copy against both of alice's agents
    cells = flags.first.locator("td").all_inner_texts()
    assert cells[0] == "original (alice)" and cells[1] == "bobs-copy (bob)" and cells[2] == "player"
    assert cells[3] == "100.0%" and cells[5] == "512"
    status = page.locator("#clones-status").inner_text()
    assert "3 neural agents fingerprinted" in status and "1 same-owner families" in status
    assert "2 clone flags" in page.locator("#integrity-status").inner_text()


def test_a_new_versions_page_says_its_fingerprint_is_computing_then_fills_in(page, server):
    """Runs last: it adds alice's third version. Its page opens while the fingerprint is queued (the
    read computed nothing), and fills in by itself once the background's worker computed it."""
    third = server.submit("alice", "third-version", with_noise(server.state, 1e-4, 3))
    page.goto(f"{server.url}/agents/{third}")
    page.wait_for_function("() => document.querySelector('#family tbody').textContent.includes('being computed')")
    assert worker_of(server.services).drain() == 1
    rows = page.locator("#family tbody tr:not(.empty)")
    page.wait_for_function("() => document.querySelectorAll('#family tbody tr:not(.empty)').length === 3",
                           timeout=15_000)
    assert rows.nth(2).locator("th").inner_text() == "third-version (this agent)"
