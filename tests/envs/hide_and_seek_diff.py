"""What a differential test of a v1 core compares after every step, beside the step's own
outputs: the state arrays it names, the critic's state, the phase detectors, the door
statistics and the fort potential, each through the test's own exact comparison."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.rules import PHASES

Same = Callable[[str, Any, Any, int], None]
"""``same(what, expected, got, step)``: fails the test unless they are equal."""


def compare_v1_state(ref: HideAndSeekV1Core, core: Any, step: int, same: Same, state: Iterable[str]) -> None:
    """Compare ``core`` with the reference numpy core ``ref`` after ``step``."""
    for name in state:
        same(name, getattr(ref, name), getattr(core, name), step)
    same("critic state", ref.critic_state(), core.critic_state(), step)
    ref_phases, phases = ref.phases(), core.phases()
    for name in PHASES:
        same(f"phase {name}", ref_phases[name], phases[name], step)
    for locked in (False, True):
        same(f"door status {locked}", ref.door_block_status(locked), core.door_block_status(locked), step)
    same("fort potential", ref.fort_potential(), core.fort_potential(), step)
