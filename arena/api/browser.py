"""Browser sessions: the cookie a signed-in person's browser carries, CSRF tokens, Origin checks.

Signing in on the site (:mod:`arena.web.accounts`) opens a session: a random id
(``secrets.token_urlsafe(32)``) in an ``httponly``, ``SameSite=Lax`` cookie (``Secure``
over HTTPS), stored server-side only as its sha256 with an expiry; signing out deletes
the row, so a copied cookie stops working too.

CSRF. Every form the site posts carries a token in a hidden field, checked here:

* signed in, the token is an HMAC of the session id (so it is per session, and
  nothing more is stored); the pages' scripts send it as the ``X-CSRF-Token`` header
  (read from ``<meta name="csrf-token">``);
* signed out (the sign-in and sign-up forms), it is an HMAC of a random value in a
  second cookie (``arena_form``, ``SameSite=Strict``): a double-submit token, so a
  foreign site cannot sign a visitor in as someone else either.

On top of the token, a post whose ``Origin`` (else ``Referer``) names another host is
refused. The API accepts the session cookie in place of a bearer token only where that
is CSRF-safe: reads (GET, HEAD, OPTIONS), and writes that carry the session's
``X-CSRF-Token`` from a same-site page (:func:`arena.api.deps.optional_user`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from fastapi import Request, Response
from sqlalchemy.orm import Session

from arena.core.errors import Forbidden
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow

SESSION_COOKIE = "arena_session"
FORM_COOKIE = "arena_form"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SESSION_LIFETIME = timedelta(days=14)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_COOKIE_CHARS = 128  # ours are 43; anything longer is not one
_CSRF_CONTEXT = b"arena csrf v1"


def new_secret() -> str:
    """A fresh random session id (or form secret): 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


def csrf_token_for(secret: str) -> str:
    """The CSRF token that goes with ``secret`` (a session id or a form cookie's value)."""
    return hmac.new(secret.encode(), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def _cookie(request: Request, name: str) -> str | None:
    value = request.cookies.get(name)
    return value if value and len(value) <= _MAX_COOKIE_CHARS else None


def session_id(request: Request) -> str | None:
    """The session id the request's cookie carries (not yet checked against the database)."""
    return _cookie(request, SESSION_COOKIE)


def session_user(request: Request, sessions: Sessions) -> repo.UserInfo | None:
    """The signed-in user of ``request`` (a stored, unexpired session), looked up once per request."""
    cached = getattr(request.state, "session_user", False)
    if cached is not False:
        return cached
    sid = session_id(request)
    user = None
    if sid is not None:
        with sessions() as session:
            user = repo.user_for_session(session, sid)
    request.state.session_user = user
    return user


def same_origin(request: Request) -> bool:
    """Whether the request's ``Origin`` (else ``Referer``) is this site; ``True`` when neither is sent.

    Hosts are compared (not schemes): behind a proxy that ends TLS the app sees http.
    """
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    return source != "null" and urlsplit(source).netloc.lower() == request.headers.get("host", "").lower()


def csrf_ok(request: Request, given: str | None, secret: str | None) -> bool:
    """Whether a post carries ``secret``'s CSRF token and comes from this site."""
    return (same_origin(request) and secret is not None and bool(given)
            and hmac.compare_digest(given, csrf_token_for(secret)))


def check_csrf(request: Request, given: str | None, secret: str | None) -> None:
    """Refuses a form post whose CSRF token does not match ``secret``'s, or from another site.

    Raises:
        Forbidden: The token is missing or wrong, or the post came from another site.
    """
    if not same_origin(request):
        raise Forbidden("this form was posted from another site; use Arena's own pages")
    if not csrf_ok(request, given, secret):
        raise Forbidden("the form's security token is missing or out of date: reload the page and try again")


def form_secret(request: Request) -> str | None:
    """The signed-out forms' double-submit secret (the ``arena_form`` cookie), if sent."""
    return _cookie(request, FORM_COOKIE)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, sid: str, expires_at: datetime) -> None:
    """Gives the browser the session cookie (httponly, SameSite=Lax, Secure over HTTPS)."""
    response.set_cookie(SESSION_COOKIE, sid, max_age=int((expires_at - utcnow()).total_seconds()),
                        path="/", httponly=True, samesite="lax", secure=_secure(request))


def clear_session_cookie(response: Response, request: Request) -> None:
    """Tells the browser to drop its session cookie."""
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=_secure(request))


def set_form_cookie(response: Response, request: Request, secret: str) -> None:
    """Gives the browser the signed-out forms' secret (httponly, SameSite=Strict)."""
    response.set_cookie(FORM_COOKIE, secret, path="/", httponly=True, samesite="strict", secure=_secure(request))


def open_session(sessions: Sessions, user_id: int) -> tuple[str, datetime]:
    """Stores a new browser session for ``user_id`` (pruning expired ones); returns its id and expiry."""
    sid, expires_at = new_secret(), utcnow() + SESSION_LIFETIME

    def store(session: Session) -> None:
        repo.delete_expired_sessions(session)
        repo.create_web_session(session, user_id, sid, expires_at)

    sessions.write_transaction(store, what="opening a browser session")
    return sid, expires_at
