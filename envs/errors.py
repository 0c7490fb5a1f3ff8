"""One exception hierarchy for the whole project (lives in the bottom layer so every
package can raise it; ``arena.errors`` re-exports it).

Every error a user can cause derives from :class:`ArenaError`; the HTTP layer maps
each class to a status code in one place (``status_code``). Messages tell the user
what to fix.
"""

from __future__ import annotations


class ArenaError(Exception):
    """Base class of every error Arena raises on purpose."""

    status_code = 400


class UnknownEnv(ArenaError):
    """An environment id that is not registered."""

    status_code = 404


class UnknownAgent(ArenaError):
    """An agent name, builtin or id that cannot be resolved."""

    status_code = 404


class InvalidSubmission(ArenaError):
    """A checkpoint or spec that fails validation; nothing was stored."""

    status_code = 422


class InvalidRecord(ArenaError):
    """A match record that is malformed or cannot be re-simulated."""

    status_code = 422


class NotAuthenticated(ArenaError):
    """A request that needs an API token came without a valid one."""

    status_code = 401


class Forbidden(ArenaError):
    """An authenticated user asked for something only its owner (or an admin) may do."""

    status_code = 403


class Conflict(ArenaError):
    """The request clashes with stored state (a taken name, an agent already submitted).

    Attributes:
        existing_id: Id of the stored resource the request collides with, if any.
    """

    status_code = 409

    def __init__(self, message: str, existing_id: int | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class PayloadTooLarge(ArenaError):
    """An upload over the configured size limit; it was not read to the end."""

    status_code = 413


class InvalidParameter(ArenaError):
    """A well-formed request value that is not acceptable here (a role the env lacks)."""

    status_code = 422


class UnknownMatch(ArenaError):
    """A match id that is not in the match log."""

    status_code = 404


class ServiceUnavailable(ArenaError):
    """A backing service (database, Redis) did not answer within the bounded wait."""

    status_code = 503
