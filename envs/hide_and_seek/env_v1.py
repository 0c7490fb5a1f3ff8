"""Hide and seek with ramps (``hide_and_seek-v1``): v0's grid game plus OpenAI's ramp affordances.

Everything of ``hide_and_seek-v0`` (:mod:`envs.hide_and_seek.env`) holds - actions
(``Discrete(7)``: noop, four moves, grab/release, lock/unlock), boxes that are pushed,
pulled, dragged and locked per team, a preparation phase in which seekers are frozen,
team rewards (+1 per post-preparation step for hiders when no seeker sees a hider, -1
otherwise; seekers the opposite), the ``higher_score`` outcome - plus:

**Pushing**: an agent holding nothing that moves into an unlocked box nobody holds pushes
it one cell on (and steps into its cell) if the cell beyond is free, as boxes are pushed
in OpenAI's physics world; v0 moves boxes only while grabbed. A locked box or one that
somebody holds cannot be pushed, so a fort holds against seekers only if its boxes are
locked.

**Ramps** (``n_ramps``, default 1) are movable objects like boxes: grabbed, pushed,
pulled, dragged, locked and unlocked by the same actions and rules (a locked ramp can
be moved by nobody and unlocked only by the team that locked it). Unlike boxes:

* *Climbing*: an agent holding nothing may walk onto a ramp nobody holds; it then
  stands on it (a ramp with an agent on it cannot be grabbed or pushed). A locked ramp
  can still be climbed.
* *Crossing*: from a ramp, a move into a wall or a box (a door block) vaults it: the
  agent lands on the cell beyond if that cell is floor and empty. So a seeker that
  drags the ramp next to the room's wall or next to a box in a doorway, climbs it and
  moves on gets into the hiders' room.
* *Seeing over walls*: ramps do not block sight, and an agent standing on a ramp sees
  (and is seen) over the walls and boxes right next to it (its 8 neighbouring cells),
  within the vision radius: a ramp pushed against the room's wall lets a seeker look in.
* *Denying it*: during preparation the hiders can lock the ramp (where it is locked it
  stays, e.g. far from the room's walls) or drag it inside their room.
* *No box surfing*: boxes cannot be climbed and a box never enters a ramp's cell (the
  rules do not allow surfing, so there is no surfing phase).

**Layouts** (``layout``): ``"quadrant"`` (default; after OpenAI's quadrant game) - on a
9x9 grid the hiders' room is one walled quadrant (3x3 inside) in a random corner with
one or two doors (``n_doors``); 2 hiders and 2 boxes start inside, 2 seekers and the
ramp outside. ``"random"``: v0's random rooms (random size, corner and doors, half the
boxes inside) with the ramp outside. See :mod:`envs.hide_and_seek.layouts_v1`.
``reset(options={"layout": rows})`` starts from a hand-drawn layout (v0's characters
plus ``R`` ramp, ``p``/``q`` ramp locked by hiders/seekers).

**Observation** (flat float32, length ``7 * view_size**2 + 8``, 575 by default): v0's
six window channels (its ``boxes`` channel shows boxes and ramps; the lock channels
show locked boxes and ramps) and seven flat features, then a ``ramps`` window channel
and an ``on_ramp`` flag.

**Phases** (``infos[agent]["phases"]`` every step, and ``env.unwrapped.phases()``): the
per-episode detectors of :data:`envs.hide_and_seek.core_v1.PHASES` - ``chasing`` (share
of post-preparation steps in which a seeker saw a hider), ``fort`` (every door held a
box when preparation ended), ``ramp_use`` (a seeker crossed a wall or box by ramp, or
saw a hider from a ramp that it could not have seen from the ground) and
``ramp_defense`` (when preparation ended every ramp was inside the room, or locked by
the hiders where no vault from it lands in the room). A replayed match's final infos
therefore say which phases happened in it.

The dynamics live in :class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`; this env
wraps a core of one episode, its compiled twin
(:class:`envs.hide_and_seek.compiled_v1.CompiledHideAndSeekV1Core`, equal step for step).

Version history:
    v1: initial release (grid 9, quadrant layout, 2 hiders, 2 seekers, 2 boxes, 1 ramp,
        50 steps, 40% preparation). A day after release boxes became pushable by walking
        into them; v1 replays recorded before that change replay only on the code that
        recorded them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from envs.hide_and_seek.compiled_v1 import CompiledHideAndSeekV1Core
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.env import HideAndSeekEnv
from envs.hide_and_seek.layouts_v1 import parse_layout
from envs.hide_and_seek.rules import HIDERS, SEEKERS, UNLOCKED

RAMP_COLORS = {UNLOCKED: (150, 200, 120), HIDERS: (90, 160, 190), SEEKERS: (200, 150, 120)}
RAMP_CHARS = {UNLOCKED: "R", HIDERS: "p", SEEKERS: "q"}


class HideAndSeekV1Env(HideAndSeekEnv):
    """Hide and seek with ramps (see the module docstring).

    Args:
        config: The game's settings (default: the registered env's), see
            :class:`envs.hide_and_seek.config.HideAndSeekV1Config`.
        render_mode: ``None``, ``"rgb_array"`` or ``"ansi"``.
    """

    metadata: ClassVar[dict[str, Any]] = {**HideAndSeekEnv.metadata, "name": "hide_and_seek_v1"}
    core_type = CompiledHideAndSeekV1Core
    core: HideAndSeekV1Core

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode; the layout follows from ``seed`` (or ``options["layout"]``)."""
        if options and "layout" in options:
            if seed is not None:
                self._rng = np.random.default_rng(seed)
            self.core.set_layout(0, parse_layout(options["layout"]))
            self.agents = self.possible_agents[:]
            return self._per_agent(self.core.observe()[0]), self._infos(self.core.action_masks()[0])
        return super().reset(seed=seed)

    def _infos(self, masks: np.ndarray) -> dict[str, dict]:
        infos = super()._infos(masks)
        phases = self.phases()
        for info in infos.values():
            info["phases"] = dict(phases)
        return infos

    def phases(self) -> dict[str, float]:
        """The episode's phase detectors so far (see the module docstring)."""
        return {name: float(v[0]) for name, v in self.core.phases().items()}

    def _cells(self) -> tuple[np.ndarray, np.ndarray]:
        chars, colors = super()._cells()
        core = self.core
        for b in np.flatnonzero(core.is_ramp):
            y, x = core.box_pos[0, b]
            lock = int(core.box_lock[0, b])
            chars[y, x] = RAMP_CHARS[lock]
            colors[y, x] = RAMP_COLORS[lock]
        return chars, colors

    def _ansi(self) -> str:
        text = super()._ansi()
        up = self.core.elevated()[0]
        if up.any():
            names = [a for a, u in zip(self.possible_agents, up) if u]
            text += " on ramp: " + ", ".join(names)
        return text


def parallel_env(render_mode: str | None = None, **settings: Any) -> HideAndSeekV1Env:
    """The registered constructor of ``hide_and_seek-v1``: ``settings`` are :class:`HideAndSeekV1Config`'s fields."""
    return HideAndSeekV1Env(HideAndSeekV1Config(**settings), render_mode=render_mode)


__all__ = ["HideAndSeekV1Env", "parallel_env"]
