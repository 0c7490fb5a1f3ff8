"""Re-export of the project's exception hierarchy (defined in :mod:`envs.errors`)."""

from envs.errors import ArenaError, InvalidRecord, InvalidSubmission, UnknownAgent, UnknownEnv

__all__ = ["ArenaError", "InvalidRecord", "InvalidSubmission", "UnknownAgent", "UnknownEnv"]
