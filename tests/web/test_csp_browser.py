"""The pages under their Content-Security-Policy in Chromium, and an account made in the browser.

The ``page`` fixture (conftest) fails a test on any CSP violation the page reports; here
each main page is loaded and its script is seen to have run (so a blocked script would
show; the API docs are test_browser.py's), and a person signs up, makes an API token and
signs out through the forms.
"""

from __future__ import annotations

import pytest

from arena.storage.db import repositories as repo
from tests.web.seed import C4, SeededArena
from tests.web.test_browser import TIMEOUT_MS, server, sync_api  # noqa: F401 - the live server; skips without chromium

pytestmark = pytest.mark.browser
PASSWORD = "a long enough password"


def sign_up_in_browser(page: object, base_url: str, name: str) -> None:
    """Signs ``name`` up through the site's form; the page ends on the account page, signed in."""
    page.goto(f"{base_url}/signup")
    page.fill("#signup-name", name)
    page.fill("#signup-password", PASSWORD)
    page.fill("#signup-password2", PASSWORD)
    page.click("#signup-submit")
    page.wait_for_url(f"{base_url}/account?welcome=1")


def test_the_main_pages_run_their_scripts_without_a_csp_violation(page: object, server: str,  # noqa: F811
                                                                    seeded: SeededArena) -> None:
    with seeded.sessions() as session:
        agent = repo.get_agent_by_key(session, C4, "heuristic")
    c4_match = repo_first_match(seeded)
    # Each page, and an element only its script fills in.
    pages = {
        "/": "a.brand",
        f"/envs/{C4}": "#leaderboard tbody tr[data-agent] time.ago",
        f"/envs/{C4}/payoff": "td.heat",
        f"/agents/{agent.id}": "#rating-chart svg, #rating-chart canvas, .chart svg",
        f"/matches/{c4_match}": "#board .cell",
        "/signin": "#signin-form",
    }
    for path, selector in pages.items():
        response = page.goto(f"{server}{path}")
        assert response.status == 200, path
        assert "nonce-" in response.headers["content-security-policy"]
        page.wait_for_selector(selector, state="attached")
    # The relative times of the leaderboard come from arena.js: it ran under the policy.
    page.goto(f"{server}/envs/{C4}")
    page.wait_for_function("() => [...document.querySelectorAll('time.ago')].some(t => t.textContent.includes('ago'))",
                           timeout=TIMEOUT_MS)


def repo_first_match(seeded: SeededArena) -> str:
    with seeded.sessions() as session:
        return repo.match_history(session, env_id=C4, limit=1).matches[0].id


def test_a_person_signs_up_makes_a_token_and_signs_out_in_the_browser(page: object, server: str) -> None:  # noqa: F811
    page.goto(f"{server}/")
    page.click("#nav-signup")
    page.fill("#signup-name", "grace")
    page.fill("#signup-password", "short")
    page.fill("#signup-password2", "short")
    page.evaluate("document.querySelectorAll('input').forEach(i => i.removeAttribute('minlength'))")
    page.click("#signup-submit")
    assert "at least 10 characters" in page.locator("#form-error").inner_text()  # the server says what to fix
    page.fill("#signup-password", PASSWORD)
    page.fill("#signup-password2", PASSWORD)
    page.click("#signup-submit")
    page.wait_for_url(f"{server}/account?welcome=1")
    assert page.locator("#nav-account").inner_text() == "grace"
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["arena_session"]["httpOnly"] and cookies["arena_session"]["sameSite"] == "Lax"
    assert page.evaluate("document.cookie").find("arena_session") == -1  # scripts cannot read it

    page.click("#token-rotate")
    token = page.locator("#new-token").inner_text()
    assert token.startswith("arena_")
    me = page.request.get(f"{server}/api/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["name"] == "grace"

    page.click("#nav-signout")
    page.wait_for_url(f"{server}/")
    assert page.locator("#nav-signin").is_visible()
    assert "arena_session" not in {c["name"] for c in page.context.cookies()}
