"""Differential tests: the torch hide-and-seek core against the numpy core, step by step.

Both cores start from the same v0 layouts (drawn from the same seeds) and receive the
same random actions - mostly legal ones, a fifth anything in ``-1 .. 7`` so illegal
and out-of-range actions (which act as noop) are exercised too. After every step the
observations, rewards, dones, action masks, the full state, the centralized critic's
state features (``critic_state``) and the door statistics must be equal. The numpy core
is itself checked against the PettingZoo env (``test_hide_and_seek.py``: a batched core
equals single envs), so agreement here is agreement with ``hide_and_seek-v0``.

The 3,000-episode run is marked ``slow``; a 500-episode run and the curriculum/team-size
variants run always. ``ARENA_DIFFERENTIAL_EPISODES`` (e.g. 10000) raises the large batches
here and in the v1 tests: worth it before changing a core, minutes each. Torch runs on one
thread here: these are many small operations, which a second (busy) core only slows.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.device.core import TorchHideAndSeekCore
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")
STATE = ("agent_pos", "box_pos", "box_lock", "box_holder", "holding", "agent_at", "box_at",
         "t", "seen", "walls", "doors")


def episodes(default: int) -> int:
    """The size of a large differential batch: ``ARENA_DIFFERENTIAL_EPISODES`` if set."""
    return int(os.environ.get("ARENA_DIFFERENTIAL_EPISODES", default))


def random_actions(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    legal = (rng.random(masks.shape) * masks).argmax(-1)
    wild = rng.integers(-1, 8, size=legal.shape)
    return np.where(rng.random(legal.shape) < 0.2, wild, legal)


def assert_same(what: str, expected: np.ndarray, got: torch.Tensor, step: int) -> None:
    got = got.cpu().numpy()
    if not np.array_equal(expected, got):
        env = np.argwhere((expected != got).reshape(len(expected), -1).any(1))[0, 0]
        pytest.fail(f"{what} differ at step {step} in env {env}:\n{expected[env]}\n{got[env]}")


def reset_both(ref, core, rng: np.random.Generator) -> np.ndarray:
    """Reset both cores with the same random seeds, check they agree; returns the masks."""
    seeds = rng.integers(0, 2**31, size=ref.n_envs)
    obs, masks = ref.reset(seeds)
    got = core.reset(seeds)
    for what, x, y in (("observations", obs, got[0]), ("masks", masks, got[1])):
        assert_same(what, x, y, 0)
    return masks


def run_differential(n: int, seed: int, device: str, **kwargs) -> dict[str, int]:
    """Play ``n`` random episodes in both cores; returns how often each rule fired."""
    ref = HideAndSeekCore(n, HideAndSeekConfig(**kwargs))
    core = TorchHideAndSeekCore(n, HideAndSeekConfig(**kwargs), device=device)
    rng = np.random.default_rng(seed)
    masks = reset_both(ref, core, rng)
    seen = {"held": 0, "locked_by_hiders": 0, "locked_by_seekers": 0, "seen": 0, "hidden": 0,
            "blocked": 0}
    for step in range(1, ref.max_steps + 1):
        actions = random_actions(rng, masks)
        expected = ref.step(actions)
        got = core.step(torch.as_tensor(actions, device=device))
        for what, x, y in zip(("observations", "rewards", "dones", "masks"), expected, got,
                              strict=True):
            assert_same(what, x, y, step)
        for name in STATE:
            assert_same(name, getattr(ref, name), getattr(core, name), step)
        assert_same("critic state", ref.critic_state(), core.critic_state(), step)
        for locked in (False, True):
            assert_same(f"door status {locked}", ref.door_block_status(locked),
                        core.door_block_status(locked), step)
        masks = expected[3]
        seen["held"] += int((ref.holding >= 0).sum())
        seen["locked_by_hiders"] += int((ref.box_lock == 0).sum())
        seen["locked_by_seekers"] += int((ref.box_lock == 1).sum())
        seen["seen"] += int(ref.seen.sum())
        seen["hidden"] += int((~ref.seen).sum())
        seen["blocked"] += int(ref.door_block_status().sum())
    assert expected[2].all()
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_torch_core_plays_3000_random_v0_episodes_like_the_numpy_core(device: str) -> None:
    fired = run_differential(episodes(3_000), 20240613, device)
    assert all(count > 0 for count in fired.values()), fired


@pytest.mark.parametrize("device", DEVICES)
def test_torch_core_plays_500_random_v0_episodes_like_the_numpy_core(device: str) -> None:
    fired = run_differential(500, 20240614, device)
    # Random hiders rarely block a door on v0's 15x15 grid; the curriculum variant below does.
    assert all(count > 0 for what, count in fired.items() if what != "blocked"), fired


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 9, "n_doors": 1, "seekers_by_door": True},  # the training curriculum
        {"size": 9, "n_doors": 2, "box_by_door": True},
        {"n_hiders": 1, "n_seekers": 3, "n_boxes": 0, "max_steps": 20},
        {"size": 11, "n_boxes": 3, "view_size": 5, "vision_radius": 3, "prep_fraction": 0.0},
    ],
)
def test_torch_core_matches_the_numpy_core_on_other_settings(kwargs: dict) -> None:
    fired = run_differential(100, 7, "cpu", **kwargs)
    if kwargs.get("seekers_by_door"):
        assert fired["blocked"] > 0


def test_layout_bank_resets_some_rows_on_the_device() -> None:
    core = TorchHideAndSeekCore(6, HideAndSeekConfig(size=9))
    ref = HideAndSeekCore(6, HideAndSeekConfig(size=9))
    seeds = np.arange(10, 16)
    core.reset(seeds)
    ref.reset(seeds)
    for _ in range(5):
        actions = np.full((6, 4), 2)
        ref.step(actions)
        core.step(torch.as_tensor(actions))
    bank = core.draw_layouts([100, 101])
    obs, masks = core.reset_from_bank(bank, torch.tensor([1, 0]), torch.tensor([4, 2]))
    ref_obs, ref_masks = ref.reset([101, 100], np.array([4, 2]))
    assert np.array_equal(obs.numpy(), ref_obs) and np.array_equal(masks.numpy(), ref_masks)
    assert core.t.tolist() == [5, 5, 0, 5, 0, 5]
    with pytest.raises(ValueError, match="envs to reset"):
        core.reset_from_bank(bank, torch.tensor([0]), torch.tensor([1, 2]))
