"""Deprecated: moved to :mod:`envs.hide_and_seek.core`; this path re-exports it for one release."""

from envs.hide_and_seek.core import (
    HideAndSeekCore,
)
from envs.hide_and_seek.rules import CHANNELS, FLAT, GRAB, LOCK, NOOP, NUM_ACTIONS

__all__ = [
    "CHANNELS",
    "FLAT",
    "GRAB",
    "LOCK",
    "NOOP",
    "NUM_ACTIONS",
    "HideAndSeekCore",
]
