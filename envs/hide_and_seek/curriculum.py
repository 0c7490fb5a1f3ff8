"""Hide-and-seek's start-state curriculum: where training episodes start, never what they pay.

The cores take the curriculum as attributes read at every reset (:data:`ATTRIBUTES`), so a
trainer may change them between updates:

* ``box_by_door``: a share of the episodes (or ``True``/``False``) starts with boxes next
  to the doors inside (:func:`envs.hide_and_seek.layouts.random_layout`,
  :func:`envs.hide_and_seek.layouts_v1.quadrant_layout`);
* ``ramp_by_door`` (v1's quadrant): a share starts with the ramp near a door and a hider
  on its way there, ``ramp_reach`` (0 .. 1) saying how far
  (:func:`envs.hide_and_seek.layouts_v1.place_ramp_stage`).

Whether an episode gets a stage is drawn from its layout seed (:func:`drawn_share`), so
the same seed and shares always give the same start. :class:`CurriculumRule` says how a
league moves the stages from one generation to the next (:class:`CurriculumState`);
the rewards are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

ATTRIBUTES = ("box_by_door", "ramp_by_door", "ramp_reach")
"""core attributes a curriculum may change between updates"""


def drawn_share(share: bool | float, seed: int, stream: int) -> bool:
    """A curriculum option that holds for ``share`` of the episodes, drawn from the layout seed."""
    share = float(share)
    return share >= 1.0 or (share > 0.0 and bool(np.random.default_rng([int(seed), stream]).random() < share))


@dataclass(frozen=True)
class CurriculumState:
    """Where a trainer's episodes start now: the shares of the two stages and the ramp stage's reach."""

    boxes: float = 0.0
    """share of episodes with boxes by the doors"""
    ramps: float = 0.0
    """share of episodes with the ramp by a door (v1's quadrant)"""
    reach: float = 0.0
    """how far those episodes' ramp and hider are from the door (0 .. 1)"""

    def apply(self, core: Any, boxes_always: bool = False) -> None:
        """Set ``core``'s curriculum attributes (``boxes_always``: every episode has boxes by the doors)."""
        core.box_by_door = 1.0 if boxes_always else self.boxes
        core.ramp_by_door, core.ramp_reach = self.ramps, self.reach


@dataclass(frozen=True)
class CurriculumRule:
    """How the stages follow the standard-layout phase rates, after every generation.

    * *forts*: ``share * (1 - fort / target)`` of the episodes start with boxes by the
      doors: the easy episodes fade out as the skill carries over to the standard layout;
    * *ramps* (``ramp_stage``): ``share * gate * (1 - ramp_defense / target)`` start with the
      ramp near a door and a hider on its way there. The gate opens with whichever comes
      first: forts common (``clip(2 fort / target - 1, 0, 1)``: 0 up to half the target, 1 at
      it), or the seekers using the ramp (``ramp_use_gate``: ``clip((ramp_use - use_floor) /
      (use_full - use_floor), 0, 1)``; untrained seekers use it in ~0.14 of the standard
      episodes by chance). Defending the ramp pays only once seekers climb it: in the honest
      hour runs the seekers' ramp use reached 0.7-0.8 while forts stayed near 0.4, and a
      gate on forts alone kept the stage shut;
    * the *reach* of the ramp stage moves as automatic domain randomization moves its
      bounds: after a generation trained with the stage defended the ramp in ``defended``
      of the stage's own episodes, up ``reach_step`` at ``>= reach_up``, down below
      ``reach_down``, within ``[0, 1]``.
    """

    enabled: bool = True
    share: float = 0.5
    target: float = 0.8
    ramp_stage: bool = True
    reach_step: float = 0.1
    reach_up: float = 0.4
    reach_down: float = 0.1
    ramp_use_gate: bool = True
    """the ramp stage also opens with the seekers' ramp use (else with forts alone, as before)"""
    use_floor: float = 0.2
    """ramp-use rate at which that gate starts to open (above the untrained ~0.14)"""
    use_full: float = 0.5
    """... and at which it is fully open"""

    def ramp_gate(self, rates: Mapping[str, float]) -> float:
        """How far the ramp stage is open (0 .. 1) after a generation with these rates."""
        fort = min(1.0, rates.get("fort", 0.0) / self.target)
        gate = min(1.0, max(0.0, 2.0 * fort - 1.0))
        if self.ramp_use_gate:
            use = (rates.get("ramp_use", 0.0) - self.use_floor) / (self.use_full - self.use_floor)
            gate = max(gate, min(1.0, max(0.0, use)))
        return gate

    def shares(self, rates: Mapping[str, float]) -> tuple[float, float]:
        """``(boxes, ramps)`` shares after a generation with these standard-layout phase rates."""
        if not self.enabled:
            return 0.0, 0.0
        fort = min(1.0, rates.get("fort", 0.0) / self.target)
        defended = min(1.0, rates.get("ramp_defense", 0.0) / self.target)
        ramps = self.share * self.ramp_gate(rates) * (1.0 - defended)
        return self.share * (1.0 - fort), ramps if self.ramp_stage else 0.0

    def next_reach(self, reach: float, defended: float | None) -> float:
        """The reach after a generation that defended the ramp in ``defended`` of the stage's
        episodes (``None``: it trained without the stage)."""
        if defended is None or not self.reach_step:
            return reach
        if defended >= self.reach_up:
            return round(min(1.0, reach + self.reach_step), 6)
        if defended < self.reach_down:
            return round(max(0.0, reach - self.reach_step), 6)
        return reach

    def after(self, state: CurriculumState, rates: Mapping[str, float], defended: float | None) -> CurriculumState:
        """The curriculum for the next generation."""
        return CurriculumState(*self.shares(rates), self.next_reach(state.reach, defended))
