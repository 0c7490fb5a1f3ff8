"""Security headers on every HTTP response: a nonce-based Content-Security-Policy and friends.

:class:`SecurityHeaders` is a plain ASGI middleware (WebSockets pass through untouched).
For each request it draws a fresh nonce, puts it in ``request.state.csp_nonce`` (the
templates write it on every ``<script>``) and adds:

* ``Content-Security-Policy``: scripts run only with the request's nonce (no
  ``'unsafe-inline'``, no ``eval``), everything else from this origin only, no
  plugins, no ``<base>``, forms post only here, and ``frame-ancestors 'none'``.
  Style *attributes* are allowed (``style-src-attr``: the pages draw bars and board
  sizes with them); ``<style>`` elements are not. ``/docs`` and ``/redoc`` get their
  own policy: Swagger UI and ReDoc inject ``<style>`` elements at run time and ReDoc
  starts a worker from a ``blob:`` URL; their scripts still need the nonce.
* ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``,
  ``X-Frame-Options: DENY`` (for browsers without ``frame-ancestors``),
  ``Cross-Origin-Opener-Policy: same-origin``.

A response that already sets one of these keeps its own.
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DOCS_PATHS = frozenset({"/docs", "/redoc"})


def page_policy(nonce: str) -> str:
    """The CSP of the site's pages (and of every other response but the API docs)."""
    return ("default-src 'self'; "
            f"script-src 'nonce-{nonce}'; "
            "style-src 'self'; style-src-attr 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def docs_policy(nonce: str) -> str:
    """The CSP of ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc)."""
    return ("default-src 'self'; "
            f"script-src 'nonce-{nonce}' 'strict-dynamic'; "
            "style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; connect-src 'self'; font-src 'self' data:; worker-src 'self' blob:; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class SecurityHeaders:
    """ASGI middleware adding the security headers (see the module docstring) to HTTP responses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        scope.setdefault("state", {})["csp_nonce"] = nonce
        policy = docs_policy(nonce) if scope["path"] in DOCS_PATHS else page_policy(nonce)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "same-origin")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
            await send(message)

        await self.app(scope, receive, send_with_headers)
