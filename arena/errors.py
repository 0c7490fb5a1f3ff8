"""Re-export of the project's exception hierarchy (defined in :mod:`envs.errors`)."""

from envs.errors import (
    ArenaError,
    Conflict,
    Forbidden,
    InvalidParameter,
    InvalidRecord,
    InvalidSubmission,
    NotAuthenticated,
    PayloadTooLarge,
    ServiceUnavailable,
    UnknownAgent,
    UnknownEnv,
    UnknownMatch,
)

__all__ = [
    "ArenaError",
    "Conflict",
    "Forbidden",
    "InvalidParameter",
    "InvalidRecord",
    "InvalidSubmission",
    "NotAuthenticated",
    "PayloadTooLarge",
    "ServiceUnavailable",
    "UnknownAgent",
    "UnknownEnv",
    "UnknownMatch",
]
