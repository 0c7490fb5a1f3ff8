"""The connection to an Arena server: one httpx client below ``/api/v1``, the bearer token,
and the server's error answers turned into :mod:`arena.client.errors`.

:class:`ApiTransport` is the base the endpoint groups (:mod:`arena.client.agents`,
:mod:`arena.client.matches`) build on; :class:`arena.client.ArenaClient` joins them.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Self

import httpx

from arena.client.errors import ArenaConnectionError, ArenaHTTPError
from arena.client.tokens import default_server, load_token

log = logging.getLogger(__name__)

__all__ = ["API_PREFIX", "JSON", "USER_AGENT", "ApiTransport", "ClosedOnExit"]

API_PREFIX = "/api/v1"
USER_AGENT = "arena-client/0.1"

JSON = dict[str, Any]


def _detail(response: httpx.Response) -> str:
    """The user-facing message of an error response."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:500] if text else response.reason_phrase or "error"
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):  # FastAPI request validation: [{loc, msg, type}, ...]
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc", ()) if p not in ("body", "query"))
                parts.append(f"{loc}: {item.get('msg', item)}" if loc else str(item.get("msg", item)))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return detail if isinstance(detail, str) else json.dumps(detail)


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the ``None`` ones."""
    return {k: v for k, v in values.items() if v is not None}


class ClosedOnExit:
    """``with`` support for a client that holds connections: leaving the block calls :meth:`close`."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection pool."""
        raise NotImplementedError


class ApiTransport(ClosedOnExit):
    """The connection to one Arena server's API: requests, errors, the token (what every endpoint group uses).

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000`` (default ``$ARENA_SERVER``).
        token: API token; default ``$ARENA_TOKEN`` or the token file (:func:`load_token`).
        timeout: Seconds per request (connect, read and write each).
        transport: An httpx transport (e.g. ``httpx.ASGITransport(app)`` for in-process use).

    Attributes:
        token: The bearer token sent with every request (settable).
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 30,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or default_server()).rstrip("/")
        self.token = token if token is not None else load_token()
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX,
            timeout=timeout,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            transport=transport,
        )

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r}, token={'set' if self.token else 'unset'})"

    # -- plumbing ---------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; returns the decoded JSON body (``None`` for an empty body).

        Args:
            method: HTTP method.
            path: Path below ``/api/v1`` (e.g. ``"/agents/3"``).
            **kwargs: Passed to :meth:`httpx.Client.request` (``params``, ``json``, ...).

        Raises:
            ArenaHTTPError: The server answered 4xx/5xx.
            ArenaConnectionError: The server could not be reached.
        """
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One API call's successful response (errors raised as in :meth:`request`)."""
        headers = dict(kwargs.pop("headers", None) or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TimeoutException as exc:
            raise ArenaConnectionError(
                f"{method} {self.base_url}{API_PREFIX}{path} timed out ({exc.__class__.__name__})"
            ) from exc
        except httpx.TransportError as exc:
            raise ArenaConnectionError(
                f"cannot reach the Arena server at {self.base_url} ({exc}); is `arena serve` "
                "running there? Set --server or ARENA_SERVER to point elsewhere."
            ) from exc
        if response.is_error:
            detail = _detail(response)
            if response.status_code == 401 and not self.token:
                detail += "; no API token set: run `arena user create NAME` or `arena login`, or set ARENA_TOKEN"
            log.debug("%s %s -> %s: %s", method, response.url, response.status_code, detail)
            raise ArenaHTTPError(response.status_code, detail, method, str(response.url),
                                 _json_object(response))
        return response

    def _get(self, path: str, **params: Any) -> Any:
        """``GET path`` with the query ``params`` that are not ``None``; the decoded JSON body."""
        return self.request("GET", path, params=_params(**params))
