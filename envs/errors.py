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
