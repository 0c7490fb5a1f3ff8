"""Deprecated: moved to :mod:`agents.hide_and_seek.bounds`; this path re-exports it for one release."""

from agents.hide_and_seek.bounds import (
    INF,
    Bound,
    Distances,
    fort_bound,
    no_bound,
    ramp_bound,
)

__all__ = [
    "INF",
    "Bound",
    "Distances",
    "fort_bound",
    "no_bound",
    "ramp_bound",
]
