"""Deprecated: moved to :mod:`envs.hide_and_seek.layouts`; this path re-exports it for one release."""

from envs.hide_and_seek.layouts import (
    Layout,
    bresenham,
    line_of_sight,
    near_doors,
    open_doors,
    parse_layout,
    random_layout,
    room_size_range,
    sight_cells,
    sight_table,
    windows,
)
from envs.hide_and_seek.rules import HIDERS, MOVES, SEEKERS, UNLOCKED

__all__ = [
    "HIDERS",
    "MOVES",
    "SEEKERS",
    "UNLOCKED",
    "Layout",
    "bresenham",
    "line_of_sight",
    "near_doors",
    "open_doors",
    "parse_layout",
    "random_layout",
    "room_size_range",
    "sight_cells",
    "sight_table",
    "windows",
]
