"""Hide-and-seek's settings: one frozen object per version, taken by every core and env.

:class:`HideAndSeekConfig` (``hide_and_seek-v0``) and :class:`HideAndSeekV1Config`
(``hide_and_seek-v1``: v0's settings with v1's defaults, plus ramps and v1's layouts) are
what the numpy cores (:mod:`.core`, :mod:`.core_v1`), their torch twins (:mod:`.device`)
and the PettingZoo envs (:mod:`.env`, :mod:`.env_v1`) take; a core checks a config
against the rules (room sizes, layouts) when it is built. The registered envs' kwargs
(:mod:`envs.builtin`) are these fields: ``parallel_env(**kwargs)`` builds the config.

``box_by_door``, ``ramp_by_door`` and ``ramp_reach`` are where the start-state curriculum
starts: a core copies them to attributes that a trainer may change between updates
(:mod:`.curriculum`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HideAndSeekConfig:
    """The settings of ``hide_and_seek-v0`` (the defaults are the registered env's)."""

    size: int = 15
    """side of the square grid, outer walls included (>= 9)"""
    n_hiders: int = 2
    """agents ``0 .. n_hiders - 1`` are hiders"""
    n_seekers: int = 2
    """the agents after the hiders are seekers"""
    n_boxes: int = 2
    """movable boxes"""
    max_steps: int = 60
    """episode length in steps (every agent acts once per step)"""
    prep_fraction: float = 0.4
    """share of ``max_steps`` in which seekers are frozen and nobody is rewarded"""
    vision_radius: int = 7
    """Euclidean sight range in cells"""
    view_size: int = 9
    """side of the egocentric observation window (odd)"""
    n_doors: int | None = None
    """doors of the hiders' room: ``None`` draws one or two per layout, ``1`` or ``2`` forces
    that many (training curricula)"""
    box_by_door: bool = False
    """curriculum: random layouts start a box in the room next to the door
    (:func:`envs.hide_and_seek.layouts.random_layout`)"""
    seekers_by_door: bool = False
    """curriculum (v0 only): random layouts start the seekers outside next to the door"""


@dataclass(frozen=True)
class HideAndSeekV1Config(HideAndSeekConfig):
    """The settings of ``hide_and_seek-v1``: v0's, v1's defaults, and the ramps' (see
    :mod:`envs.hide_and_seek.core_v1`)."""

    size: int = 9
    """side of the square grid, outer walls included (>= 9)"""
    max_steps: int = 50
    """episode length in steps"""
    box_by_door: bool | float = False
    """curriculum: layouts start boxes next to the doors inside; ``True``/``False``, or the
    share of episodes that start so (drawn from each layout seed)"""
    n_ramps: int = 1
    """ramps (movable objects stored after the boxes)"""
    layout: str = "quadrant"
    """``"quadrant"`` or ``"random"`` (v0's random rooms), see :mod:`envs.hide_and_seek.layouts_v1`"""
    ramp_by_door: bool | float = False
    """curriculum (quadrant layouts), in ``box_by_door``'s form: the ramp starts near a door,
    a hider on the way to it (:func:`envs.hide_and_seek.layouts_v1.place_ramp_stage`)"""
    ramp_reach: float = 0.0
    """how far those episodes' ramp and hider are from the door and each other, ``0`` (two
    cells out, the hider next to it) .. ``1`` (as drawn)"""
