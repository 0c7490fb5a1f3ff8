"""Differential tests: the torch hide-and-seek-v1 core against the numpy v1 core, step by step.

As ``test_device_hide_and_seek.py`` for v0: both cores start from the same layouts
(drawn from the same seeds by the numpy layout code) and receive the same random
actions (mostly legal, a fifth anything in ``-1 .. 7``). After every step the
observations, rewards, dones, masks, the full state (ramps included), the centralized
critic's state features (``critic_state``), the door statistics and the phase detectors
must be equal. 4,000 short (24-step) quadrant episodes run in one batch, plus 1,500
episodes of random-room layouts and other settings, and 2,000 full-length (50-step)
episodes (``slow``; ``ARENA_DIFFERENTIAL_EPISODES`` raises both batches, e.g. to 10,000 before
changing a core). The sizes are set by the rarest rules the counts below name, not the common
ones: at 4,000 short / 2,000 full episodes a seeker vaults 43 / 53 times, a fort stands at the end
of 34 / 31 episodes and a ramp is defended at the end of 7 / 34 (pushes, steps on a ramp and sightings
fire thousands of times, ramp use ~200), so a smaller batch would leave those rules nearly unexercised.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.device.core_v1 import TorchHideAndSeekV1Core
from envs.hide_and_seek.layouts_v1 import parse_layout
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture
from tests.envs.hide_and_seek_diff import compare_v1_state
from tests.envs.test_device_hide_and_seek import STATE, assert_same, episodes, random_actions, reset_both

pytestmark = pytest.mark.usefixtures("one_torch_thread")
STATE_V1 = (*STATE, "room", "vault", "vaulted", "seen_steps", "ramp_used")


def run_differential(n: int, seed: int, device: str, **kwargs) -> dict[str, int]:
    """Play ``n`` random v1 episodes in both cores; returns how often each rule fired."""
    ref = HideAndSeekV1Core(n, HideAndSeekV1Config(**kwargs))
    core = TorchHideAndSeekV1Core(n, HideAndSeekV1Config(**kwargs), device=device)
    masks = reset_both(ref, core, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    fired = {"on_ramp": 0, "vaulted": 0, "pushed": 0, "ramp_use": 0, "ramp_defense": 0, "seen": 0,
             "hidden": 0, "fort": 0}
    for step in range(1, ref.max_steps + 1):
        actions = random_actions(rng, masks)
        before = ref.box_pos.copy()
        expected = ref.step(actions)
        got = core.step(torch.as_tensor(actions, device=device))
        for what, x, y in zip(("observations", "rewards", "dones", "masks"), expected, got, strict=True):
            assert_same(what, x, y, step)
        compare_v1_state(ref, core, step, assert_same, STATE_V1)
        assert_same("door fraction", ref.door_fraction(), core.door_fraction(), step)
        masks = expected[3]
        fired["pushed"] += int(((ref.box_pos != before).any(-1) & (ref.box_holder < 0)).sum())
        fired["on_ramp"] += int(ref.elevated().sum())
        fired["vaulted"] += int(ref.vaulted.sum())
        fired["seen"] += int(ref.seen.sum())
        fired["hidden"] += int((~ref.seen).sum())
    final = ref.phases()
    fired["ramp_use"] = int(final["ramp_use"].sum())
    fired["ramp_defense"] = int(final["ramp_defense"].sum())
    fired["fort"] = int(final["fort"].sum())
    assert expected[2].all()
    return fired


@pytest.mark.parametrize("device", DEVICES)
def test_torch_v1_core_plays_4000_short_random_quadrant_episodes_like_the_numpy_core(device: str) -> None:
    fired = run_differential(episodes(4_000), 20240701, device, max_steps=24)
    assert all(count > 0 for count in fired.values()), fired


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_torch_v1_core_plays_2000_full_random_quadrant_episodes_like_the_numpy_core(device: str) -> None:
    fired = run_differential(episodes(2_000), 20240702, device)
    assert all(count > 0 for count in fired.values()), fired


@pytest.mark.parametrize(
    "kwargs",
    [
        {"layout": "random", "size": 11},
        {"n_doors": 1, "box_by_door": True},
        {"box_by_door": 0.5, "ramp_by_door": 0.5, "ramp_reach": 0.5},
        {"n_ramps": 2, "n_boxes": 1, "max_steps": 20, "prep_fraction": 0.0},
        {"n_ramps": 0, "n_hiders": 1, "n_seekers": 1, "view_size": 5, "vision_radius": 3},
    ],
)
def test_torch_v1_core_matches_the_numpy_core_on_other_settings(kwargs: dict) -> None:
    run_differential(300, 11, "cpu", **kwargs)


def test_set_layout_starts_a_hand_drawn_v1_layout() -> None:
    layout = parse_layout([
        "#########",
        "#H..#...#",
        "#.o.#R..#",
        "#...#S..#",
        "##D##...#",
        "#.......#",
        "#..S...H#",
        "#.......#",
        "#########",
    ])
    ref = HideAndSeekV1Core(2, HideAndSeekV1Config(n_boxes=1, prep_fraction=0.0))
    core = TorchHideAndSeekV1Core(2, HideAndSeekV1Config(n_boxes=1, prep_fraction=0.0))
    ref.reset([3, 4])
    core.reset([3, 4])
    ref.set_layout(1, layout)
    core.set_layout(1, layout)
    assert np.array_equal(ref.observe(), core.observe().numpy())
    assert np.array_equal(ref.action_masks(), core.action_masks().numpy())
    assert np.array_equal(ref.room, core.room.numpy()) and core.room[1].sum() == 9
    for move in (1, 4):  # the seeker below the ramp steps onto it (up), then vaults the wall (left)
        actions = np.zeros((2, 4), dtype=np.int64)
        actions[1, 2] = move
        ref.step(actions)
        core.step(torch.as_tensor(actions))
        assert np.array_equal(ref.observe(), core.observe().numpy())
    assert core.agent_pos[1, 2].tolist() == [2, 3] and bool(core.vaulted[1, 2])
    assert core.phases()["ramp_use"].tolist() == ref.phases()["ramp_use"].tolist() == [0.0, 1.0]
