"""The client's errors: what a refused request, an unreachable server and a wait that ran
out of time raise. All derive from :class:`envs.errors.ArenaError`."""

from __future__ import annotations

from typing import Any

from envs.errors import ArenaError

__all__ = ["ArenaConnectionError", "ArenaHTTPError", "ArenaTimeout"]


class ArenaHTTPError(ArenaError):
    """The server answered with an error status.

    Attributes:
        status: The HTTP status code of the answer.
        detail: The server's message (its ``detail`` field), meant for the user.
        method: HTTP method of the failed request.
        url: URL of the failed request.
        body: The decoded JSON error body (``{}`` if there was none), e.g. a 409's
            ``existing_id``.
    """

    def __init__(self, status: int, detail: str, method: str = "", url: str = "",
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.detail = detail
        self.method = method
        self.url = url
        self.body = body or {}


class ArenaConnectionError(ArenaError):
    """The server could not be reached (not running, wrong URL, network down)."""


class ArenaTimeout(ArenaError, TimeoutError):
    """A wait (e.g. :meth:`arena.client.ArenaClient.wait_for_status`) ran out of time."""

