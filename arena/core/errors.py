"""The service's errors: what a request or a stored record can get wrong.

They derive from :class:`envs.errors.ArenaError`, the root of the one hierarchy, which
stays in the bottom layer with the errors the games and agents raise (an unknown env or
agent, an invalid submission, a backing service that does not answer). The errors here
belong to the service alone: authentication and ownership, quotas and rate limits,
conflicts with stored state, unknown matches and challenges. What each means over HTTP
is :mod:`arena.api.errors`, in one place. Messages tell the user what to fix.
"""

from __future__ import annotations

from envs.errors import ArenaError

__all__ = [
    "Conflict",
    "Forbidden",
    "InvalidParameter",
    "InvalidRecord",
    "NotAuthenticated",
    "PayloadTooLarge",
    "ReplayNotKept",
    "TooManyRequests",
    "UnknownChallenge",
    "UnknownCompetition",
    "UnknownMatch",
]


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


class ReplayNotKept(UnknownMatch):
    """A match whose action list was dropped by replay retention (its result is kept)."""


class UnknownChallenge(ArenaError):
    """A challenge id that was never queued, or whose record has expired."""


class UnknownCompetition(ArenaError):
    """A competition id that does not exist, or a private one the caller has not joined."""


class UnknownTournament(ArenaError):
    """A tournament id that does not exist, or one of a private competition the caller has not joined."""


class TooManyRequests(ArenaError):
    """A rate limit or quota was reached; ``retry_after_s`` says when to try again."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, int(retry_after_s))
