"""One exception hierarchy for the whole project (it lives in the bottom layer so every
package can raise it).

Every error a user can cause derives from :class:`ArenaError`. Messages tell the user
what to fix. What an error means over HTTP is the API's business: ``arena.api.errors``
maps each class to a status code, in one place.
"""

from __future__ import annotations


class ArenaError(Exception):
    """Base class of every error Arena raises on purpose."""


class UnknownEnv(ArenaError):
    """An environment id that is not registered."""


class UnknownAgent(ArenaError):
    """An agent name, builtin or id that cannot be resolved."""


class InvalidSubmission(ArenaError):
    """A checkpoint or spec that fails validation; nothing was stored."""


class InvalidRecord(ArenaError):
    """A match record that is malformed or cannot be re-simulated."""


class NotAuthenticated(ArenaError):
    """A request that needs an API token came without a valid one."""


class Forbidden(ArenaError):
    """An authenticated user asked for something only its owner (or an admin) may do."""


class Conflict(ArenaError):
    """The request clashes with stored state (a taken name, an agent already submitted).

    Attributes:
        existing_id: Id of the stored resource the request collides with, if any.
    """

    def __init__(self, message: str, existing_id: int | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class PayloadTooLarge(ArenaError):
    """An upload over the configured size limit; it was not read to the end."""


class InvalidParameter(ArenaError):
    """A well-formed request value that is not acceptable here (a role the env lacks)."""


class UnknownMatch(ArenaError):
    """A match id that is not in the match log."""


class UnknownChallenge(ArenaError):
    """A challenge id that was never queued, or whose record has expired."""


class ServiceUnavailable(ArenaError):
    """A backing service (database, Redis) did not answer within the bounded wait."""


class TooManyRequests(ArenaError):
    """A rate limit or quota was reached; ``retry_after_s`` says when to try again."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, int(retry_after_s))


class ReplayNotKept(UnknownMatch):
    """A match whose action list was dropped by replay retention (its result is kept)."""
