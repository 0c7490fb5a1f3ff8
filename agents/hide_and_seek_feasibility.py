"""Deprecated: moved to :mod:`agents.hide_and_seek.feasibility`; this path re-exports it for one release."""

from agents.hide_and_seek.feasibility import (
    LEVELS,
    POST_PREPARATION,
    TASKS,
    LayoutReport,
    done,
    feasibility,
    make_core,
    plan_layout,
    play_plans,
    preparation_needed,
    summary,
)

__all__ = [
    "LEVELS",
    "POST_PREPARATION",
    "TASKS",
    "LayoutReport",
    "done",
    "feasibility",
    "make_core",
    "plan_layout",
    "play_plans",
    "preparation_needed",
    "summary",
]
