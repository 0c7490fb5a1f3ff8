"""Accounts in the browser: sign up, sign in, sign out, the account page, CSRF and the session cookie.

Through TestClient on a real app over a fresh SQLite database and its own Redis
database; what is stored is read back from the database (hashes, never secrets).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from arena.api import create_app
from arena.api.browser import CSRF_HEADER, FORM_COOKIE, SESSION_COOKIE
from arena.core.settings import Settings
from arena.ladder.registration import register_builtin_agents
from arena.storage.db import repositories as repo
from arena.storage.db import upgrade
from arena.storage.db.models import User, WebSession
from arena.storage.wiring import Services, open_services
from tests.api.helpers import RAISED_LIMITS

ENV = "tictactoe-v3"
PASSWORD = "correct horse battery"
API = "/api/v1"


def fresh_services(tmp_path: Path, redis_url: str, database_url: str | None = None,
                   **limits: int) -> Iterator[Services]:
    """The services of a new arena (tictactoe, builtin ``random``) over ``redis_url``, on
    ``database_url`` (default: a SQLite file under ``tmp_path``)."""
    database_url = database_url or f"sqlite+pysqlite:///{tmp_path / 'arena.sqlite3'}"
    upgrade(database_url)
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "data", database_url=database_url,
                        redis_url=redis_url, envs=ENV, probe_concurrency=0, **{**RAISED_LIMITS, **limits})
    with open_services(settings) as services:
        services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, ["random"]), what="builtins")
        yield services


@pytest.fixture
def services(tmp_path: Path, redis_url: str, db_url: str) -> Iterator[Services]:
    """On SQLite and on PostgreSQL (``db_url``)."""
    yield from fresh_services(tmp_path, redis_url, db_url)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as c:
        yield c


def form_token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field in the form"
    return found.group(1)


def sign_up(client: TestClient, name: str, password: str = PASSWORD) -> None:
    token = form_token(client.get("/signup").text)
    response = client.post("/signup", data={"name": name, "password": password, "password2": password,
                                            "csrf_token": token}, follow_redirects=False)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/account?welcome=1"


def session_csrf(client: TestClient) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', client.get("/account").text)
    assert found, "signed in pages carry the session's CSRF token"
    return found.group(1)


def test_sign_up_sign_out_and_sign_in_again(client: TestClient, services: Services) -> None:
    response = client.get("/signup")
    assert response.status_code == 200 and client.cookies.get(FORM_COOKIE)
    assert "httponly" in response.headers["set-cookie"].lower()
    assert "samesite=strict" in response.headers["set-cookie"].lower()
    sign_up(client, "ada")

    sid = client.cookies.get(SESSION_COOKIE)
    assert sid and len(sid) >= 40
    with services.sessions() as session:
        stored_password = session.execute(select(User.password_hash).where(User.name == "ada")).scalar_one()
        rows = session.execute(select(WebSession.session_hash, WebSession.expires_at)).all()
    assert stored_password.startswith("$argon2id$") and PASSWORD not in stored_password
    assert [r.session_hash for r in rows] == [hashlib.sha256(sid.encode()).hexdigest()]  # the id itself is not kept

    account = client.get("/account")
    assert account.status_code == 200 and "<h1>ada</h1>" in account.text and 'id="nav-signout"' in account.text
    index = client.get("/")
    assert index.headers["cache-control"] == "private" and "Cookie" in index.headers["vary"]  # no shared cache
    assert client.get(f"{API}/users/me").json()["name"] == "ada"  # the API reads the session cookie

    out = client.post("/signout", data={"csrf_token": session_csrf(client)}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/"
    with services.sessions() as session:
        assert repo.user_for_session(session, sid) is None  # deleted server-side, not just forgotten
    client.cookies.set(SESSION_COOKIE, sid)  # a copied cookie is worth nothing after sign-out
    assert client.get(f"{API}/users/me").status_code == 401
    assert client.get("/account", follow_redirects=False).headers["location"] == "/signin?next=/account"
    client.cookies.delete(SESSION_COOKIE)

    token = form_token(client.get("/signin").text)
    wrong = client.post("/signin", data={"name": "ada", "password": "not the password", "csrf_token": token})
    assert wrong.status_code == 400 and "wrong name or password" in wrong.text
    assert client.cookies.get(SESSION_COOKIE) is None
    right = client.post("/signin", data={"name": "ada", "password": PASSWORD, "csrf_token": token,
                                         "next": "/envs/tictactoe-v3"}, follow_redirects=False)
    assert right.status_code == 303 and right.headers["location"] == "/envs/tictactoe-v3"
    assert client.cookies.get(SESSION_COOKIE) not in (None, sid)  # a new session id
    assert client.get(f"{API}/users/me").json()["name"] == "ada"


def test_sign_up_says_what_to_fix_and_stores_nothing(client: TestClient, services: Services) -> None:
    token = form_token(client.get("/signup").text)
    cases = [
        ({"name": "9lives", "password": PASSWORD, "password2": PASSWORD}, 400, "a name is 1-64 characters"),
        ({"name": "bob", "password": "short", "password2": "short"}, 400, "at least 10 characters"),
        ({"name": "bob", "password": PASSWORD, "password2": PASSWORD + "!"}, 400, "the two passwords differ"),
    ]
    for fields, status, message in cases:
        response = client.post("/signup", data={**fields, "csrf_token": token})
        assert response.status_code == status and message in response.text, fields
        assert 'id="form-error"' in response.text
    sign_up(client, "bob")
    client.cookies.delete(SESSION_COOKIE)
    taken = client.post("/signup", data={"name": "bob", "password": PASSWORD, "password2": PASSWORD,
                                         "csrf_token": token})
    assert taken.status_code == 409 and "the name &#39;bob&#39; is taken" in taken.text
    with services.sessions() as session:
        assert session.execute(select(User.name).where(User.name.in_(["9lives", "bob"]))).scalars().all() == ["bob"]


def test_forms_refuse_missing_or_foreign_csrf(client: TestClient, services: Services) -> None:
    token = form_token(client.get("/signup").text)
    fields = {"name": "eve", "password": PASSWORD, "password2": PASSWORD}
    assert client.post("/signup", data=fields).status_code == 403
    assert client.post("/signup", data={**fields, "csrf_token": "0" * 64}).status_code == 403
    foreign = client.post("/signup", data={**fields, "csrf_token": token}, headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "another site" in foreign.text
    with services.sessions() as session:
        assert repo.get_user_by_name(session, "eve") is None

    sign_up(client, "carol")
    sid = client.cookies.get(SESSION_COOKIE)
    csrf = session_csrf(client)
    assert csrf != token  # signed in, the token is the session's
    assert client.post("/signout", data={}).status_code == 403
    assert client.post("/account/token", data={"csrf_token": token}).status_code == 403  # the signed-out one
    with services.sessions() as session:
        assert repo.user_for_session(session, sid) is not None  # still signed in
    other = TestClient(client.app)  # another browser: its own form cookie, so carol's token is worthless there
    other.cookies.set(SESSION_COOKIE, "not-a-session")
    assert other.post("/signup", data={**fields, "csrf_token": csrf}).status_code == 403


def test_the_api_takes_the_session_cookie_only_where_csrf_safe(client: TestClient, services: Services) -> None:
    sign_up(client, "dan")
    with services.sessions() as session:
        agent = repo.get_agent_by_key(session, ENV, "random")
    assert agent is not None
    url = f"{API}/agents/{agent.id}/play"
    refused = client.post(url, json={"seat": 0})
    assert refused.status_code == 403 and CSRF_HEADER in refused.json()["detail"]
    csrf = session_csrf(client)
    foreign = client.post(url, json={"seat": 0}, headers={CSRF_HEADER: csrf, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    opened = client.post(url, json={"seat": 0}, headers={CSRF_HEADER: csrf})
    assert opened.status_code == 202, opened.text
    with services.sessions() as session:
        human = repo.get_agent(session, opened.json()["human_agent_id"])
        dan = repo.get_user_by_name(session, "dan")
    assert human is not None and dan is not None and human.owner_id == dan.id  # rated as dan, not as a guest


def test_the_account_page_rotates_the_api_token(client: TestClient) -> None:
    sign_up(client, "erin")
    first = client.post("/account/token", data={"csrf_token": session_csrf(client)})
    assert first.status_code == 200 and first.headers["cache-control"] == "no-store"
    token1 = re.search(r'<code id="new-token" class="token">([^<]+)</code>', first.text).group(1)
    bare = TestClient(client.app)  # the CLI: no cookies, a bearer token
    assert bare.get(f"{API}/users/me", headers={"Authorization": f"Bearer {token1}"}).json()["name"] == "erin"
    second = client.post("/account/token", data={"csrf_token": session_csrf(client)})
    token2 = re.search(r'<code id="new-token" class="token">([^<]+)</code>', second.text).group(1)
    assert token2 != token1 and "previous token no longer works" in second.text
    assert bare.get(f"{API}/users/me", headers={"Authorization": f"Bearer {token1}"}).status_code == 401
    assert bare.get(f"{API}/users/me", headers={"Authorization": f"Bearer {token2}"}).json()["name"] == "erin"
    assert token2 not in client.get("/account").text  # shown once


def test_a_cli_user_signs_in_with_its_token_then_sets_a_password(client: TestClient) -> None:
    created = client.post(f"{API}/users", json={"name": "frank"}).json()  # the CLI's flow, unchanged
    token = form_token(client.get("/signin").text)
    no_password = client.post("/signin", data={"name": "frank", "password": PASSWORD, "csrf_token": token})
    assert no_password.status_code == 400 and "sign in with its API token" in no_password.text
    by_token = client.post("/signin", data={"token": created["token"], "csrf_token": token}, follow_redirects=False)
    assert by_token.status_code == 303
    saved = client.post("/account/password", data={"password": PASSWORD, "password2": PASSWORD,
                                                    "csrf_token": session_csrf(client)})
    assert saved.status_code == 200 and "Password saved" in saved.text
    client.post("/signout", data={"csrf_token": session_csrf(client)})
    again = client.post("/signin", data={"name": "frank", "password": PASSWORD, "csrf_token": token},
                        follow_redirects=False)
    assert again.status_code == 303
    assert client.get(f"{API}/users/me").json()["name"] == "frank"
    assert client.get(f"{API}/users/me", headers={"Authorization": f"Bearer {created['token']}"}).json()["id"] == \
        created["id"]  # the token still works: setting a password does not touch it


def test_sign_in_attempts_are_rate_limited(tmp_path: Path, redis_url: str) -> None:
    for services in fresh_services(tmp_path, redis_url, client_writes_per_minute=3):
        with TestClient(create_app(services)) as client:
            token = form_token(client.get("/signin").text)
            codes = []
            # 3 attempts a minute: the 4th is refused (up to the 7th if a minute's window ended among them).
            while 429 not in codes and len(codes) < 7:
                response = client.post("/signin", data={"name": "nobody", "password": f"guess number {len(codes)}",
                                                        "csrf_token": token})
                codes.append(response.status_code)
            assert codes[-1] == 429 and set(codes[:-1]) == {400} and 3 <= len(codes) - 1 <= 6, codes
            assert "too many requests" in response.text and 'id="form-error"' in response.text


@pytest.mark.parametrize("target, expected", [
    ("/envs/x", "/envs/x"), ("//evil.example/x", "/account"), ("https://evil.example", "/account"),
    ("/\\evil.example", "/account"), ("/\t/evil.example", "/account"), ("/x\\y", "/account"),
    ("/ /evil.example", "/account"), (None, "/account"), ("/competitions/3#my-team", "/competitions/3#my-team"),
])
def test_sign_in_goes_back_to_this_site_only(target: str | None, expected: str) -> None:
    from arena.web.accounts import safe_next

    assert safe_next(target) == expected
