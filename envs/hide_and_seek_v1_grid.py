"""Deprecated: moved to :mod:`envs.hide_and_seek.layouts_v1`; this path re-exports it for one release."""

from envs.hide_and_seek.layouts_v1 import (
    LAYOUTS,
    LayoutV1,
    parse_layout,
    place_ramp_stage,
    quadrant_layout,
    random_room_layout,
    room_mask,
    steps_from,
)

__all__ = [
    "LAYOUTS", "LayoutV1", "parse_layout", "place_ramp_stage", "quadrant_layout", "random_room_layout",
    "room_mask", "steps_from",
]
