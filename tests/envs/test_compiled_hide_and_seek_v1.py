"""Differential tests: the compiled hide-and-seek-v1 core against the numpy v1 core, step by step.

Both cores reset from the same seeds and receive the same random actions (mostly legal, a
fifth anything in ``-1 .. 7``). After every step the observations, rewards, dones and
masks, every state array (sight and the end-of-preparation snapshots included), the
critic's state, the phase detectors and the door statistics must be exactly equal (same
dtype, same values). Episodes run to their end and start again (all rows, and some rows
alone), on every layout family and the settings the trainer and the curriculum use; hand
drawn layouts put every agent next to ramps, boxes and walls. The quadrant draws of the
compiled reset are checked against :func:`quadrant_layout` itself. Sizes stay modest: the
kernels compile once per checkout (numba's cache), the suite then pays seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.hide_and_seek.compiled_v1 import BACKENDS, CompiledHideAndSeekV1Core, QuadrantDraws, v1_core
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.env_v1 import HideAndSeekV1Env
from envs.hide_and_seek.layouts import Layout
from envs.hide_and_seek.layouts_v1 import parse_layout, quadrant_layout
from tests.envs.hide_and_seek_diff import compare_v1_state

STATE = ("walls", "doors", "room", "vault", "agent_pos", "box_pos", "box_lock", "box_holder", "holding", "agent_at",
         "box_at", "t", "seen", "vaulted", "seen_steps", "ramp_used", "_prep_doors", "_prep_ramps", "_ground_vis",
         "_last_vis")


def same(what: str, expected: np.ndarray, got: np.ndarray, step: int) -> None:
    expected, got = np.asarray(expected), np.asarray(got)
    assert expected.dtype == got.dtype and expected.shape == got.shape, (what, expected.dtype, got.dtype)
    if not np.array_equal(expected, got):
        env = np.argwhere((expected != got).reshape(len(expected), -1).any(1))[0, 0]
        pytest.fail(f"{what} differ at step {step} in env {env}:\n{expected[env]}\n{got[env]}")


def compare(ref: HideAndSeekV1Core, core: CompiledHideAndSeekV1Core, step: int) -> None:
    compare_v1_state(ref, core, step, same, STATE)


def random_actions(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    legal = (rng.random(masks.shape) * masks).argmax(-1)
    return np.where(rng.random(legal.shape) < 0.2, rng.integers(-1, 8, size=legal.shape), legal)


def play(ref: HideAndSeekV1Core, core: CompiledHideAndSeekV1Core, masks: np.ndarray, rng: np.random.Generator,
         steps: int, fired: dict[str, int], step0: int = 0) -> np.ndarray:
    """``steps`` random steps in both cores, compared after each; returns the masks."""
    for step in range(step0 + 1, step0 + steps + 1):
        actions = random_actions(rng, masks)
        before = ref.box_pos.copy()
        expected = ref.step(actions)
        got = core.step(actions)
        for what, x, y in zip(("observations", "rewards", "dones", "masks"), expected, got, strict=True):
            same(what, x, y, step)
        compare(ref, core, step)
        masks = expected[3]
        fired["pushed"] += int(((ref.box_pos != before).any(-1) & (ref.box_holder < 0)).sum())
        fired["on_ramp"] += int(ref.elevated().sum())
        fired["vaulted"] += int(ref.vaulted.sum())
        fired["held"] += int((ref.holding >= 0).sum())
        fired["locked"] += int((ref.box_lock >= 0).sum())
        fired["seen"] += int(ref.seen.sum())
        fired["over_walls"] += int((ref._last_vis & ~ref._ground_vis).sum())
    return masks


def run_differential(n: int, seed: int, episodes: int = 2, **kwargs) -> dict[str, int]:
    """``episodes`` rounds of ``n`` random episodes in both cores (then some rows restart alone
    mid-episode); returns how often each rule fired."""
    config = HideAndSeekV1Config(**kwargs)
    ref, core = HideAndSeekV1Core(n, config), CompiledHideAndSeekV1Core(n, config)
    rng = np.random.default_rng(seed)
    fired = dict.fromkeys(("pushed", "on_ramp", "vaulted", "held", "locked", "seen", "over_walls"), 0)
    for _ in range(episodes):
        seeds = rng.integers(0, 2**31, size=n)
        expected, got = ref.reset(seeds), core.reset(seeds)
        for what, x, y in zip(("observations", "masks"), expected, got, strict=True):
            same(what, x, y, 0)
        compare(ref, core, 0)
        play(ref, core, expected[1], rng, ref.max_steps + 1, fired)
        assert ref.t.min() == ref.max_steps
    rows = np.sort(rng.choice(n, n // 3, replace=False))
    seeds = rng.integers(0, 2**31, size=len(rows))
    expected, got = ref.reset(seeds, rows), core.reset(seeds, rows)
    for what, x, y in zip(("observations", "masks"), expected, got, strict=True):
        same(what, x, y, 0)
    play(ref, core, expected[1], rng, ref.max_steps // 2, fired)
    return fired


def test_compiled_core_plays_the_standard_quadrant_episodes_like_the_numpy_core() -> None:
    fired = run_differential(96, 20260701, episodes=3)
    assert all(count > 0 for count in fired.values()), fired


@pytest.mark.parametrize(
    "kwargs",
    [
        {"layout": "random", "size": 11},
        {"layout": "random", "size": 15, "n_ramps": 2},
        {"n_doors": 1, "box_by_door": True},
        {"n_doors": 2, "box_by_door": 0.5, "ramp_by_door": 0.5, "ramp_reach": 0.5},
        {"ramp_by_door": True, "max_steps": 30},
        {"size": 13, "n_boxes": 3, "n_hiders": 3},
        {"n_ramps": 2, "n_boxes": 1, "max_steps": 20, "prep_fraction": 0.0},
        {"n_ramps": 0, "n_hiders": 1, "n_seekers": 1, "view_size": 5, "vision_radius": 3},
        {"n_ramps": 0, "n_boxes": 0, "view_size": 11},
    ],
)
def test_compiled_core_matches_the_numpy_core_on_other_settings(kwargs: dict) -> None:
    run_differential(24, 7, episodes=1, **kwargs)


RAMPS = [  # a ramp by the room's wall, a box in the door, a seeker and a hider next to them
    "#########",
    "#.H.#...#",
    "#...#R..#",
    "#...o.S.#",
    "#####R..#",
    "#..o.S..#",
    "#.R..H..#",
    "#.......#",
    "#########",
]
CORNER = [  # ramps and boxes against the outer walls and each other
    "#########",
    "#RoH...S#",
    "#o.....R#",
    "#H..#...#",
    "##D##...#",
    "#...R...#",
    "#..SoR..#",
    "#R.....o#",
    "#########",
]


@pytest.mark.parametrize("rows", [RAMPS, CORNER])
def test_compiled_core_matches_the_numpy_core_on_hand_drawn_layouts(rows: list[str]) -> None:
    layout = parse_layout(rows)
    config = HideAndSeekV1Config(n_hiders=len(layout.hiders), n_seekers=len(layout.seekers),
                                 n_boxes=len(layout.boxes), n_ramps=len(layout.ramps), prep_fraction=0.0)
    n = 64
    ref, core = HideAndSeekV1Core(n, config), CompiledHideAndSeekV1Core(n, config)
    for c in (ref, core):
        for row in range(n):
            c.set_layout(row, layout)
    compare(ref, core, 0)
    fired = dict.fromkeys(("pushed", "on_ramp", "vaulted", "held", "locked", "seen", "over_walls"), 0)
    play(ref, core, ref.action_masks(), np.random.default_rng(len(rows[1])), ref.max_steps + 1, fired)
    assert fired["vaulted"] > 0 and fired["pushed"] > 0 and fired["over_walls"] > 0, fired


def test_quadrant_draws_are_quadrant_layout() -> None:
    draws = {size: QuadrantDraws(size) for size in (9, 11)}
    settings = [(9, 2, 2, 2, 1, None, False, False, 0.0), (9, 2, 2, 2, 1, 1, True, False, 0.0),
                (9, 2, 2, 2, 1, 2, True, True, 0.3), (11, 3, 2, 3, 2, None, True, True, 1.0)]
    for size, hiders, seekers, boxes, ramps, doors, box_by_door, ramp_by_door, reach in settings:
        for seed in range(150):
            want = quadrant_layout(size, hiders, seekers, boxes, ramps, seed, doors, box_by_door, ramp_by_door, reach)
            room, cells = draws[size].draw(seed, hiders, seekers, boxes, ramps, doors, box_by_door, ramp_by_door,
                                           reach)
            start = np.concatenate([want.hiders, want.boxes, want.seekers, want.ramps])
            assert np.array_equal(cells, start) and cells.dtype == start.dtype
            for name in ("walls", "room", "doors"):
                assert np.array_equal(getattr(room, name), getattr(want, name)), (seed, name)
    assert len(draws[9].rooms) <= 2 * 15 * 4  # one and two doors, four corners


def test_v1_core_builds_either_backend_and_the_env_runs_the_compiled_one() -> None:
    assert BACKENDS == ("compiled", "numpy")
    assert type(v1_core(2)) is CompiledHideAndSeekV1Core
    assert type(v1_core(2, HideAndSeekV1Config(layout="random"), backend="numpy")) is HideAndSeekV1Core
    with pytest.raises(ValueError, match="backend must be one of"):
        v1_core(1, backend="cuda")
    with pytest.raises(TypeError, match="takes a HideAndSeekV1Config"):
        v1_core(1, HideAndSeekV1Config.__mro__[1]())
    assert isinstance(HideAndSeekV1Env().core, CompiledHideAndSeekV1Core)


def test_compiled_core_refuses_layouts_open_at_the_border() -> None:
    layout = parse_layout(RAMPS)
    config = HideAndSeekV1Config(n_hiders=2, n_seekers=2, n_boxes=2, n_ramps=3)
    walls = layout.walls.copy()
    walls[4, 0] = False
    core = CompiledHideAndSeekV1Core(1, config)
    with pytest.raises(ValueError, match="walls all around"):
        core.set_layout(0, parse_layout(RAMPS).__class__(**{**vars(layout), "walls": walls}))
    on_border = Layout(walls=layout.walls, doors=layout.doors, hiders=np.array([[0, 3], [1, 2]]),
                       seekers=layout.seekers, boxes=np.concatenate([layout.boxes, layout.ramps]),
                       box_locks=np.full(5, -1, dtype=np.int8))
    with pytest.raises(ValueError, match="walls all around"):
        core._load(0, on_border)
    core.set_layout(0, layout)  # the drawn one loads
