"""hide_and_seek curriculum options (``n_doors``, ``box_by_door``): defaults unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.env import HideAndSeekEnv
from envs.hide_and_seek.layouts import random_layout
from envs.hide_and_seek.rules import MOVES


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("walls", "doors", "hiders", "seekers", "boxes", "box_locks"))


@pytest.mark.parametrize("seed", range(40))
def test_forcing_the_drawn_door_count_changes_nothing(seed: int) -> None:
    drawn = random_layout(15, 2, 2, 2, seed)
    one_door = bool((drawn.doors[0] == drawn.doors[1]).all())
    assert _same(drawn, random_layout(15, 2, 2, 2, seed, n_doors=1 if one_door else 2))
    forced = random_layout(15, 2, 2, 2, seed, n_doors=2 if one_door else 1)
    assert bool((forced.doors[0] == forced.doors[1]).all()) != one_door


@pytest.mark.parametrize("size", [9, 11, 15])
def test_box_by_door_starts_a_box_inside_next_to_the_door(size: int) -> None:
    core = HideAndSeekCore(64, HideAndSeekConfig(size=size, n_doors=1, box_by_door=True))
    core.reset(list(range(64)))
    assert (core.doors[:, 0] == core.doors[:, 1]).all()
    assert not core.door_block_status().any()  # the doorway itself stays open
    for e in range(64):
        door = core.doors[e, 0]
        near = {tuple(c) for c in door + MOVES}
        assert tuple(core.box_pos[e, 0]) in near
        plain = random_layout(size, 2, 2, 2, e, n_doors=1)
        # Everything but the moved box is the plain draw.
        assert np.array_equal(plain.hiders, core.agent_pos[e, :2])
        assert np.array_equal(plain.boxes[1:], core.box_pos[e, 1:])


def test_env_passes_the_options_and_rejects_bad_ones() -> None:
    env = HideAndSeekEnv(HideAndSeekConfig(size=9, n_doors=1, box_by_door=True))
    env.reset(seed=3)
    assert env.core.n_doors == 1 and env.core.box_by_door
    with pytest.raises(ValueError, match="n_doors"):
        HideAndSeekCore(1, HideAndSeekConfig(n_doors=3))


def test_seekers_by_door_start_outside_nearest_the_open_door() -> None:
    core = HideAndSeekCore(32, HideAndSeekConfig(size=9, n_doors=1, seekers_by_door=True))
    core.reset(list(range(32)))
    assert not core.door_block_status().any()
    for e in range(32):
        door = core.doors[e, 0]
        seekers = core.agent_pos[e, 2:]
        assert not any((s == door).all() for s in seekers)  # the doorway stays free
        assert np.abs(seekers - door).sum(1).min() == 1  # one stands right outside
        plain = random_layout(9, 2, 2, 2, e, n_doors=1)
        assert np.array_equal(plain.hiders, core.agent_pos[e, :2])
        assert np.array_equal(plain.boxes, core.box_pos[e])


def test_the_ramp_stage_opens_with_the_seekers_ramp_use_not_only_with_forts() -> None:
    from envs.hide_and_seek.curriculum import CurriculumRule

    rule = CurriculumRule()
    # The honest hour runs: forts near 0.4, the seekers on the ramp in most episodes.
    assert rule.shares({"fort": 0.41, "ramp_use": 0.79}) == pytest.approx((0.5 * (1 - 0.41 / 0.8), 0.5))
    assert rule.ramp_gate({"fort": 0.0, "ramp_use": 0.35}) == pytest.approx(0.5)  # halfway from 0.2 to 0.5
    assert rule.ramp_gate({"fort": 0.0, "ramp_use": 0.14}) == 0.0  # untrained seekers' chance use opens nothing
    assert rule.ramp_gate({"fort": 0.6, "ramp_use": 0.1}) == pytest.approx(0.5)  # forts still open it alone
    # Defended ramps close the stage whichever gate opened it.
    assert rule.shares({"ramp_use": 0.9, "ramp_defense": 0.8})[1] == 0.0
    forts_only = CurriculumRule(ramp_use_gate=False)
    assert forts_only.shares({"fort": 0.41, "ramp_use": 0.79})[1] == pytest.approx(0.5 * (2 * 0.41 / 0.8 - 1))
    assert forts_only.ramp_gate({"fort": 0.2, "ramp_use": 1.0}) == 0.0
    assert CurriculumRule(ramp_stage=False).shares({"ramp_use": 0.9})[1] == 0.0
