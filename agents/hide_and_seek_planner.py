"""Deprecated: moved to :mod:`agents.hide_and_seek.planner`; this path re-exports it for one release."""

from agents.hide_and_seek.planner import (
    MOVES_ONLY,
    Goal,
    TeamPlanner,
    alone,
    goals,
    nominal,
    search,
)

__all__ = [
    "MOVES_ONLY",
    "Goal",
    "TeamPlanner",
    "alone",
    "goals",
    "nominal",
    "search",
]
