"""The root of Arena's one exception hierarchy, and the errors of the games and agents.

Every error a user can cause derives from :class:`ArenaError`; it lives in the bottom
layer so that every package can raise it. Here are the errors that envs and agents
raise (an unknown env or agent, an invalid submission, a backing process or service
that does not answer); the service's own errors (authentication, ownership, quotas,
conflicts, unknown matches and challenges) are :mod:`arena.core.errors`. Messages tell
the user what to fix. What an error means over HTTP is the API's business:
``arena.api.errors`` maps each class to a status code, in one place.
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


class ServiceUnavailable(ArenaError):
    """A backing service (database, Redis, the ONNX worker processes) did not answer within the bounded wait."""
