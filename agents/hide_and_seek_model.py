"""Deprecated: moved to :mod:`agents.hide_and_seek.model`; this path re-exports it for one release."""

from agents.hide_and_seek.model import (
    ACTIONS,
    GRAB,
    LOCK,
    NOOP,
    Board,
    World,
    act,
    agent_at,
    fort,
    from_layout,
    holder,
    inside,
    legal,
    object_at,
    ramps_defended,
    step,
)
from envs.hide_and_seek.rules import HIDERS, UNLOCKED

__all__ = [
    "ACTIONS",
    "GRAB",
    "HIDERS",
    "LOCK",
    "NOOP",
    "UNLOCKED",
    "Board",
    "World",
    "act",
    "agent_at",
    "fort",
    "from_layout",
    "holder",
    "inside",
    "legal",
    "object_at",
    "ramps_defended",
    "step",
]
