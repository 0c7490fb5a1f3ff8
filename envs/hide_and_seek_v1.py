"""Deprecated: moved to :mod:`envs.hide_and_seek.env_v1`; this path re-exports it for one release."""

from envs.hide_and_seek.env import COLORS
from envs.hide_and_seek.env_v1 import (
    RAMP_CHARS,
    RAMP_COLORS,
    HideAndSeekV1Env,
    parallel_env,
)

__all__ = [
    "COLORS",
    "RAMP_CHARS",
    "RAMP_COLORS",
    "HideAndSeekV1Env",
    "parallel_env",
]
