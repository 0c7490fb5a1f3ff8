"""Deprecated: moved to :mod:`envs.hide_and_seek.core_v1`; this path re-exports it for one release."""

from envs.hide_and_seek.core_v1 import (
    HideAndSeekV1Core,
)
from envs.hide_and_seek.curriculum import drawn_share
from envs.hide_and_seek.rules import CHANNELS_V1, FLAT_V1, NOOP, NUM_ACTIONS, PHASES

__all__ = [
    "CHANNELS_V1",
    "FLAT_V1",
    "NOOP",
    "NUM_ACTIONS",
    "PHASES",
    "HideAndSeekV1Core",
    "drawn_share",
]
