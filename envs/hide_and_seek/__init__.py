"""Hide-and-seek, one package per layer (``hide_and_seek-v0`` and ``hide_and_seek-v1``).

=====================  ===========================================================
:mod:`.rules`          action, team and role ids, observation layout, phases: once
:mod:`.layouts`        v0's grids: random rooms, hand-drawn layouts, line of sight
:mod:`.layouts_v1`     v1's quadrant and random-room layouts with ramps
:mod:`.curriculum`     start-state curriculum (where training episodes start)
:mod:`.core`           v0's numpy core, many episodes at once
:mod:`.core_v1`        v1's numpy core (ramps, pushing) and its phase detectors
:mod:`.env`            v0's PettingZoo ``ParallelEnv`` (a core of one episode)
:mod:`.env_v1`         v1's PettingZoo env
:mod:`.device`         the torch cores (``cpu`` or ``cuda``), step for step the numpy ones
=====================  ===========================================================

Arrows point down the table: rules <- layouts <- cores <- envs; nothing here imports a
trainer or a league. ``envs.hide_and_seek`` was v0's env module: its names
(``HideAndSeekEnv``, ``parallel_env``, ``COLORS``, ``CELL_PIXELS``) still resolve here for
one release (deprecated; import :mod:`envs.hide_and_seek.env`).
"""

from __future__ import annotations

from typing import Any

_V0_ENV = ("CELL_PIXELS", "COLORS", "HideAndSeekEnv", "parallel_env")


def __getattr__(name: str) -> Any:
    """v0's env names, imported on first use (the package itself stays light)."""
    if name in _V0_ENV:
        from envs.hide_and_seek import env

        return getattr(env, name)
    raise AttributeError(f"module 'envs.hide_and_seek' has no attribute {name!r}")
