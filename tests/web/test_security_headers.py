"""Every page answers with the security headers, and its scripts carry the request's CSP nonce.

TestClient over the seeded arena (conftest's ``app``): every GET page route of
:func:`arena.web.routes.web_router` (path parameters filled from the database), the API
docs, a JSON endpoint, a static file and a 404.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from arena.storage.db import repositories as repo
from arena.web.routes import web_router
from tests.web.seed import C4, SeededArena


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def page_paths(seeded: SeededArena) -> list[str]:
    """A real URL for every GET page route (each route must be covered: a new one fails until filled)."""
    with seeded.sessions() as session:
        agent = repo.get_agent_by_key(session, C4, "heuristic")
    assert agent is not None
    values = {"env_id": C4, "agent_id": str(agent.id), "match_id": seeded.tag_match_id, "league_id": "1",
              "competition_id": "1", "tournament_id": "1"}
    paths = []
    for route in web_router().routes:
        if isinstance(route, APIRoute) and "GET" in route.methods:
            path = route.path
            for name in route.param_convertors:
                assert name in values, f"no value for {name} of {route.path}: add one"
                path = path.replace("{" + name + "}", values[name])
            paths.append(path)
    return paths


def script_policy(csp: str) -> str:
    return next(part.strip() for part in csp.split(";") if part.strip().startswith("script-src "))


def test_every_page_answers_with_the_security_headers(client: TestClient, seeded: SeededArena) -> None:
    paths = page_paths(seeded)
    assert {"/", "/signin", "/signup", "/account", f"/envs/{C4}", "/admin/integrity"} <= set(paths)
    others = ["/docs", "/redoc", "/openapi.json", f"/api/v1/envs/{C4}/leaderboard", "/static/arena.css",
              "/envs/no-such-env", "/api/v1/no-such-endpoint", f"/matches/{seeded.tag_match_id}"]
    nonces = set()
    for path in paths + others:
        response = client.get(path, follow_redirects=False)
        assert response.status_code < 500, path
        headers = response.headers
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "same-origin", path
        assert headers["x-frame-options"] == "DENY", path
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp and "base-uri 'none'" in csp, path
        scripts = script_policy(csp)
        assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts and "'self'" not in scripts, path
        nonce = re.search(r"'nonce-([A-Za-z0-9_-]+)'", scripts).group(1)
        nonces.add(nonce)
        if headers.get("content-type", "").startswith("text/html"):
            check_scripts(response.text, nonce, path)
    assert len(nonces) == len(paths + others)  # a fresh nonce per response


def check_scripts(html: str, nonce: str, path: str) -> None:
    """Every executable ``<script>`` carries the nonce; no inline event handler attributes."""
    for tag in re.findall(r"<script\b[^>]*>", html):
        if 'type="application/json"' in tag:  # a data block: never executed
            continue
        assert f'nonce="{nonce}"' in tag, f"{path}: {tag}"
    handlers = re.findall(r"<[^>]*\son[a-z]+\s*=", html)
    assert not handlers, f"{path}: inline event handlers {handlers}"
    assert "javascript:" not in html, path


def test_the_docs_pages_get_their_own_policy(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        csp = client.get(path).headers["content-security-policy"]
        assert "'strict-dynamic'" in script_policy(csp) and "worker-src 'self' blob:" in csp
    assert "style-src 'self';" in client.get("/").headers["content-security-policy"]  # pages: no <style> elements


def test_the_play_and_admin_pages_keep_no_token_in_browser_storage(client: TestClient, seeded: SeededArena) -> None:
    from arena.web.routes import STATIC_DIR

    for script in STATIC_DIR.glob("*.js"):
        text = script.read_text()
        assert not re.search(r"\b(local|session)Storage\s*[.\[]", text), script.name  # comments may name them
    with seeded.sessions() as session:
        agent = repo.get_agent_by_key(session, C4, "random")  # a board game: people can play it
    assert agent is not None
    html = client.get(f"/play/{agent.id}").text
    assert "play-unavailable" not in html and 'id="play-token"' in html
    assert "never stored" in html  # signed out: the page says where the typed token stays
