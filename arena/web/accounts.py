"""Accounts in the browser: sign up, sign in (password or API token), sign out, the account page.

Form posts carry a CSRF token and must come from this site (:mod:`arena.api.browser`);
sign-ups count against the sign-up limits and sign-in attempts against the anonymous
write limits (:mod:`arena.core.limits`), both per client address. A refused form is
shown again with what to fix; nothing is written. The account page shows an API token
only once, right after it is made (only its hash is stored), and making one revokes
the user's others: the CLI's token flow (``POST /api/v1/users``) is unchanged.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from arena.api import browser
from arena.api.deps import client_address
from arena.api.passwords import hash_password, needs_rehash, password_problem, verify_password
from arena.api.schemas import UserName
from arena.api.state import ApiState
from arena.core.errors import Conflict, Forbidden, TooManyRequests
from arena.storage.db import repositories as repo
from envs.errors import ArenaError

Page = Callable[..., HTMLResponse]
FormText = Annotated[str, Form(max_length=4096)]
_user_name = TypeAdapter(UserName)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (never ``//host`` or a URL).

    Backslashes, spaces and control characters are refused anywhere: browsers drop tabs and
    newlines from URLs and read a backslash as ``/``, so ``/<tab>/evil.example`` would leave the site.
    """
    if (target and target.startswith("/") and not target.startswith("//")
            and not any(ch == "\\" or ord(ch) <= 32 or ord(ch) == 127 for ch in target)):
        return target
    return "/account"


def _status(exc: ArenaError) -> int:
    return {Forbidden: 403, TooManyRequests: 429, Conflict: 409}.get(type(exc), 400)


def _api_state(request: Request) -> ApiState:
    state = getattr(request.app.state, "api", None)
    if state is None:
        raise RuntimeError("accounts need the API app's state (arena.api.create_app)")
    return state


def _signed_out_post(request: Request, csrf_token: str, count: Callable[[str], None]) -> ArenaError | None:
    """Why a signed-out form post is refused (its CSRF token, or ``count``'s limit per address); ``None``: it is not."""
    try:
        browser.check_csrf(request, csrf_token, browser.form_secret(request))
        count(client_address(request))
    except (Forbidden, TooManyRequests) as exc:
        return exc
    return None


def _signed_in(response: Response, request: Request, user_id: int) -> Response:
    """Replaces any session the browser had by a new one for ``user_id`` (no session fixation)."""
    sessions = _api_state(request).services.sessions
    old = browser.session_id(request)
    if old is not None:
        sessions.write_transaction(lambda s: repo.delete_web_session(s, old), what="closing a browser session")
    sid, expires_at = browser.open_session(sessions, user_id)
    browser.set_session_cookie(response, request, sid, expires_at)
    return response


def add_account_routes(router: APIRouter, page: Page) -> None:
    """Adds ``/signup``, ``/signin``, ``/signout``, ``/account`` (and its posts) to ``router``."""

    def signed_out_form(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        secret = browser.form_secret(request) or browser.new_secret()
        response = page(request, template, status_code=status_code, form_token=browser.csrf_token_for(secret),
                        **context)
        if browser.form_secret(request) is None:
            browser.set_form_cookie(response, request, secret)
        response.headers["Cache-Control"] = "no-store"
        return response

    def viewer(request: Request) -> repo.UserInfo | None:
        return browser.session_user(request, _api_state(request).services.sessions)

    @router.get("/signup", response_class=HTMLResponse, include_in_schema=False)
    def signup_form(request: Request) -> Response:
        if viewer(request) is not None:
            return RedirectResponse("/account", status_code=303)
        return signed_out_form(request, "signup.html", title="Sign up")

    @router.post("/signup", response_class=HTMLResponse, include_in_schema=False)
    def signup(request: Request, name: FormText, password: FormText, password2: FormText,
               csrf_token: FormText = "") -> Response:
        def again(error: str, status_code: int) -> HTMLResponse:
            return signed_out_form(request, "signup.html", status_code, title="Sign up", error=error, entered_name=name)

        state = _api_state(request)
        refused = _signed_out_post(request, csrf_token, state.limits.sign_up)
        if refused is not None:
            return again(str(refused), _status(refused))
        try:
            _user_name.validate_python(name)
        except ValidationError:
            return again("a name is 1-64 characters: a letter, then letters, digits, '_', '.' or '-'", 400)
        problem = password_problem(password)
        if problem is None and password != password2:
            problem = "the two passwords differ"
        if problem is not None:
            return again(problem, 400)
        hashed = hash_password(password)

        def create(session: Session) -> int:
            if repo.get_user_by_name(session, name) is not None:
                raise Conflict(f"the name {name!r} is taken; choose another")
            user_id = repo.create_user(session, name)
            repo.set_password_hash(session, user_id, hashed)
            return user_id

        try:
            user_id = state.services.sessions.write_transaction(create, what=f"signing up {name!r}")
        except Conflict as exc:
            return again(str(exc), 409)
        except IntegrityError:  # taken concurrently, between the check and the insert
            return again(f"the name {name!r} is taken; choose another", 409)
        return _signed_in(RedirectResponse("/account?welcome=1", status_code=303), request, user_id)

    @router.get("/signin", response_class=HTMLResponse, include_in_schema=False)
    def signin_form(request: Request, next: str | None = None) -> Response:
        if viewer(request) is not None:
            return RedirectResponse(safe_next(next), status_code=303)
        return signed_out_form(request, "signin.html", title="Sign in", next=safe_next(next))

    @router.post("/signin", response_class=HTMLResponse, include_in_schema=False)
    def signin(request: Request, name: FormText = "", password: FormText = "", token: FormText = "",
               csrf_token: FormText = "", next: FormText = "/account") -> Response:
        def again(error: str, status_code: int) -> HTMLResponse:
            return signed_out_form(request, "signin.html", status_code, title="Sign in", error=error, entered_name=name,
                                   next=safe_next(next))

        state = _api_state(request)
        refused = _signed_out_post(request, csrf_token, state.limits.anonymous_write)
        if refused is not None:
            return again(str(refused), _status(refused))
        user = _check_credentials(state, name.strip(), password, token.strip())
        if user is None:
            if token.strip():
                return again("that API token is not valid (revoked, or mistyped)", 400)
            return again("wrong name or password (an account made with the CLI has no password until "
                         "you set one: sign in with its API token, then set one on the account page)", 400)
        return _signed_in(RedirectResponse(safe_next(next), status_code=303), request, user.id)

    @router.post("/signout", include_in_schema=False)
    def signout(request: Request, csrf_token: FormText = "") -> Response:
        sid = browser.session_id(request)
        if sid is not None:
            try:
                browser.check_csrf(request, csrf_token, sid)
            except Forbidden as exc:
                return page(request, "not_found.html", status_code=403, title="Not signed out", what=str(exc))
            _api_state(request).services.sessions.write_transaction(
                lambda s: repo.delete_web_session(s, sid), what="signing out")
        response = RedirectResponse("/", status_code=303)
        browser.clear_session_cookie(response, request)
        return response

    def account_page(request: Request, user: repo.UserInfo, status_code: int = 200, **context: Any) -> Response:
        with _api_state(request).services.sessions() as session:
            has_password = repo.password_hash_of(session, user.id) is not None
        response = page(request, "account.html", status_code=status_code, title="Your account", user=user,
                        has_password=has_password, **context)
        response.headers["Cache-Control"] = "no-store"  # it may show a new API token
        return response

    @router.get("/account", response_class=HTMLResponse, include_in_schema=False)
    def account(request: Request, welcome: bool = False) -> Response:
        user = viewer(request)
        if user is None:
            return RedirectResponse("/signin?next=/account", status_code=303)
        return account_page(request, user, welcome=welcome)

    def signed_in_post(request: Request, csrf_token: str) -> repo.UserInfo | Response:
        """The signed-in user of a form post, or the response refusing it."""
        user = viewer(request)
        if user is None:
            return RedirectResponse("/signin?next=/account", status_code=303)
        try:
            browser.check_csrf(request, csrf_token, browser.session_id(request))
            _api_state(request).limits.write(user.id, client_address(request))
        except (Forbidden, TooManyRequests) as exc:
            return account_page(request, user, _status(exc), error=str(exc))
        return user

    @router.post("/account/token", response_class=HTMLResponse, include_in_schema=False)
    def new_token(request: Request, csrf_token: FormText = "") -> Response:
        user = signed_in_post(request, csrf_token)
        if isinstance(user, Response):
            return user
        token = f"arena_{secrets.token_urlsafe(32)}"
        revoked = _api_state(request).services.sessions.write_transaction(
            lambda s: repo.rotate_api_token(s, user.id, token), what="rotating an API token")
        return account_page(request, user, new_token=token, revoked=revoked)

    @router.post("/account/password", response_class=HTMLResponse, include_in_schema=False)
    def set_password(request: Request, password: FormText, password2: FormText, current: FormText = "",
                     csrf_token: FormText = "") -> Response:
        user = signed_in_post(request, csrf_token)
        if isinstance(user, Response):
            return user
        sessions = _api_state(request).services.sessions
        with sessions() as session:
            stored = repo.password_hash_of(session, user.id)
        problem = password_problem(password) or (None if password == password2 else "the two passwords differ")
        if problem is None and stored is not None and not verify_password(stored, current):
            problem = "the current password is wrong"
        if problem is not None:
            return account_page(request, user, 400, error=problem)
        hashed, keep = hash_password(password), browser.session_id(request)

        def store(session: Session) -> None:
            repo.set_password_hash(session, user.id, hashed)
            repo.delete_user_sessions(session, user.id, keep=keep)  # other browsers sign in again

        sessions.write_transaction(store, what="setting a password")
        return account_page(request, user, notice="Password saved. Other browsers signed in as you were signed out.")


def _check_credentials(state: ApiState, name: str, password: str, token: str) -> repo.UserInfo | None:
    """The user ``name``/``password`` (or ``token``) signs in as, or ``None``; rehashes an old hash."""
    sessions = state.services.sessions
    if token:
        with sessions() as session:
            return repo.user_for_token(session, token) if len(token) <= 512 else None
    with sessions() as session:
        found = repo.user_with_password(session, name) if name else None
    user, stored = found if found is not None else (None, None)
    if not verify_password(stored, password) or user is None:
        return None
    if stored is not None and needs_rehash(stored):
        fresh = hash_password(password)
        sessions.write_transaction(lambda s: repo.set_password_hash(s, user.id, fresh), what="rehashing a password")
    return user
