"""hide_and_seek-v1: ramps (climb, cross, see over walls, lock, carry), layouts, phase detectors.

Scenarios are hand-drawn layouts (v0's characters plus ``R`` ramp, ``p`` ramp locked by
the hiders). PettingZoo's ``parallel_api_test`` / ``parallel_seed_test`` run on every
registered env, v1 included, in ``test_api.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.env_v1 import HideAndSeekV1Env
from envs.hide_and_seek.layouts_v1 import parse_layout, quadrant_layout, random_room_layout, steps_from, vault_spots
from envs.hide_and_seek.rules import GRAB, HIDERS, LOCK, NOOP, PHASES
from envs.registry import get_spec, make_env

N, E, S, W = 1, 2, 3, 4
# Seeker at (6, 2) south of the ramp at (5, 2), room wall row 4; hider inside at (2, 2).
ROOM = [
    "#########",
    "#...#...#",
    "#.H.#...#",
    "#...D...#",
    "#####...#",
    "#.R.....#",
    "#.S.....#",
    "#.......#",
    "#########",
]


def core_from(rows: list[str], **kwargs) -> HideAndSeekV1Core:
    layout = parse_layout(rows)
    kwargs = {"prep_fraction": 0.0, **kwargs}
    config = HideAndSeekV1Config(size=len(rows), n_hiders=len(layout.hiders), n_seekers=len(layout.seekers),
                                 n_boxes=len(layout.boxes), n_ramps=len(layout.ramps), **kwargs)
    core = HideAndSeekV1Core(1, config)
    core.set_layout(0, layout)
    return core


def step(core: HideAndSeekV1Core, *actions: int):
    return core.step(np.array([actions]))


def random_legal(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    return (rng.random(masks.shape) * masks).argmax(-1)


def test_registered_spec_matches_the_env() -> None:
    spec = get_spec("hide_and_seek-v1")
    env = make_env("hide_and_seek-v1")
    obs, _ = env.reset(seed=0)
    assert obs["hider_0"].shape == spec.obs_shapes[0] == (575,)
    assert env.core.layout == "quadrant" and env.core.n_ramps == 1


def test_seeker_climbs_the_ramp_sees_over_the_wall_and_crosses_into_the_room() -> None:
    core = core_from(ROOM)
    assert not core.visibility()[0, 1, 0]  # the wall hides the hider
    step(core, NOOP, N)  # onto the ramp
    assert core.agent_pos[0, 1].tolist() == [5, 2] and core.elevated()[0, 1]
    assert core.visibility()[0, 1, 0] and core.visibility()[0, 0, 1]  # over the wall, both ways
    assert core.phases()["ramp_use"][0] == 1.0  # seen thanks to the ramp
    assert core.action_masks()[0, 1, N]  # the wall north can be vaulted
    step(core, NOOP, N)
    assert core.agent_pos[0, 1].tolist() == [3, 2]  # landed inside the room
    assert core.vaulted[0, 1] and core.room[0, 3, 2]


def test_ramp_sight_needs_the_wall_next_to_the_ramp() -> None:
    rows = [*ROOM[:5], "#.......#", "#.R.....#", "#.S.....#", ROOM[8]]
    core = core_from(rows)
    step(core, NOOP, N)  # on the ramp at (6, 2), two cells from the wall
    assert core.elevated()[0, 1] and not core.visibility()[0, 1, 0]
    assert core.phases()["ramp_use"][0] == 0.0


def test_boxes_cannot_be_climbed_and_ramps_do_not_block_sight() -> None:
    core = core_from(["#########", "#.......#", "#.......#", "#.......#", "#S.R.oH.#",
                      "#.......#", "#.......#", "#.......#", "#########"])
    vis = core.visibility()[0]
    assert not vis[1, 0]  # the box blocks, the ramp does not
    core2 = core_from(["#########", "#.......#", "#.......#", "#.......#", "#S.R..H.#",
                       "#.......#", "#.......#", "#.......#", "#########"])
    assert core2.visibility()[0, 1, 0]
    # A hider moving into the box pushes it; nobody ever stands on a box.
    step(core, W, NOOP)
    assert core.agent_pos[0, 0].tolist() == [4, 5] and core.box_pos[0, 0].tolist() == [4, 4]
    assert not core.elevated()[0, 0]
    # A box never enters the ramp's cell: the next push is refused.
    assert not core.action_masks()[0, 0, W]
    step(core, W, NOOP)
    assert core.agent_pos[0, 0].tolist() == [4, 5] and core.box_pos[0, 0].tolist() == [4, 4]


def test_pushing_needs_an_unlocked_box_nobody_holds_and_a_free_cell_beyond() -> None:
    rows = ["#########", "#.......#", "#.......#", "#.......#", "#..SoH..#",
            "#.......#", "#.......#", "#.......#", "#########"]
    core = core_from(rows)
    step(core, W, NOOP)  # the seeker stands beyond the box (masks ignore agents, the move fails)
    assert core.box_pos[0, 0].tolist() == [4, 4] and core.agent_pos[0, 0].tolist() == [4, 5]
    rows[4] = "#..S#oH.#"
    assert not core_from(rows).action_masks()[0, 0, W]  # a wall beyond
    rows[4] = "#S..oH..#"
    core = core_from(rows)
    step(core, W, NOOP)
    assert core.box_pos[0, 0].tolist() == [4, 3] and core.agent_pos[0, 0].tolist() == [4, 4]
    step(core, LOCK, NOOP)  # the hiders lock it: now nobody pushes it
    assert not core.action_masks()[0, 0, W]
    rows[4] = "#...oHS.#"
    core = core_from(rows)
    step(core, GRAB, NOOP)  # the hider holds the box: the seeker cannot push the hider's box away
    assert core.holding[0, 0] == 0
    step(core, W, NOOP)  # holding it, the hider pushes it as in v0
    assert core.box_pos[0, 0].tolist() == [4, 3] and core.agent_pos[0, 0].tolist() == [4, 4]


def test_locked_ramp_cannot_be_moved_but_can_be_climbed() -> None:
    core = core_from(["#########", "#.......#", "#.......#", "#.......#", "#..HpS..#",
                      "#.......#", "#.......#", "#.......#", "#########"])
    assert core.box_lock[0, 0] == HIDERS
    assert not core.action_masks()[0, 1, GRAB] and not core.action_masks()[0, 1, LOCK]
    step(core, NOOP, W)  # the seeker climbs the locked ramp
    assert core.agent_pos[0, 1].tolist() == [4, 4] and core.elevated()[0, 1]
    assert not core.action_masks()[0, 0, GRAB]  # and nobody may grab a ramp someone stands on


def test_hiders_drag_the_ramp_into_the_room_and_lock_it_during_preparation() -> None:
    rows = ["#########", "#...#...#", "#.H.#...#", "#...#...#", "##D##...#", "#.R.....#",
            "#.......#", "#.....S.#", "#########"]
    core = core_from(rows, prep_fraction=0.2, max_steps=30)  # 6 preparation steps
    assert core.prep_steps == 6
    # The hider at (2, 2) walks south into the door (4, 2) and grabs the ramp south of it.
    step(core, S, NOOP)
    step(core, S, NOOP)
    step(core, GRAB, NOOP)
    assert core.holding[0, 0] == 0
    step(core, N, NOOP)  # pull the ramp into the doorway
    step(core, N, NOOP)  # and into the room
    assert core.box_pos[0, 0].tolist() == [3, 2] and core.room[0, 3, 2]
    step(core, LOCK, NOOP)
    assert core.t[0] == core.prep_steps
    phases = core.phases()
    assert phases["ramp_defense"][0] == 1.0 and phases["fort"][0] == 0.0


@pytest.mark.parametrize(("door_cell", "fort"), [("o", 1.0), ("R", 0.0), (".", 0.0)])
def test_fort_needs_a_box_not_a_ramp_in_the_door(door_cell: str, fort: float) -> None:
    rows = list(ROOM)
    rows[3] = "#..." + door_cell + "...#"
    rows[5] = "#.......#" if door_cell == "R" else rows[5]
    layout = parse_layout(rows)
    layout.doors[:] = [3, 4]
    core = HideAndSeekV1Core(1, HideAndSeekV1Config(prep_fraction=0.1, max_steps=10, n_boxes=len(layout.boxes),
                                                    n_ramps=len(layout.ramps), n_hiders=1, n_seekers=1))
    core.set_layout(0, layout)
    for _ in range(2):
        step(core, NOOP, NOOP)
    assert core.phases()["fort"][0] == fort


@pytest.mark.parametrize("seed", range(6))
def test_layouts_put_hiders_and_boxes_in_the_room_and_the_ramp_outside(seed: int) -> None:
    q = quadrant_layout(9, 2, 2, 2, 1, seed)
    assert q.room[q.hiders[:, 0], q.hiders[:, 1]].all() and q.room[q.boxes[:, 0], q.boxes[:, 1]].all()
    assert not q.room[q.ramps[:, 0], q.ramps[:, 1]].any() and not q.room[q.seekers[:, 0], q.seekers[:, 1]].any()
    assert q.room.sum() == 9
    r = random_room_layout(15, 2, 2, 2, 1, seed)
    assert r.room[r.hiders[:, 0], r.hiders[:, 1]].all() and not r.room[r.ramps[:, 0], r.ramps[:, 1]].any()
    assert not r.walls[r.ramps[:, 0], r.ramps[:, 1]].any()


@pytest.mark.parametrize("layout", ["quadrant", "random"])
def test_batched_core_equals_single_envs(layout: str) -> None:
    seeds = [3, 14, 15, 92, 65, 35]
    size = 9 if layout == "quadrant" else 15
    core = HideAndSeekV1Core(len(seeds), HideAndSeekV1Config(size=size, layout=layout))
    obs, masks = core.reset(seeds)
    envs = [HideAndSeekV1Env(HideAndSeekV1Config(size=size, layout=layout)) for _ in seeds]
    singles = [env.reset(seed=s) for env, s in zip(envs, seeds)]
    names = envs[0].possible_agents
    for i, (o, _) in enumerate(singles):
        assert np.array_equal(obs[i], np.stack([o[a] for a in names]))
    rng = np.random.default_rng(1)
    for _ in range(core.max_steps):
        actions = np.where(rng.random((len(seeds), 4)) < 0.85, random_legal(rng, masks),
                           rng.integers(0, 7, (len(seeds), 4)))
        obs, rewards, dones, masks = core.step(actions)
        phases = core.phases()
        for i, env in enumerate(envs):
            o, r, _, _, info = env.step(dict(zip(names, actions[i].tolist())))
            assert np.array_equal(obs[i], np.stack([o[a] for a in names]))
            assert rewards[i].tolist() == [r[a] for a in names]
            assert np.array_equal(masks[i], np.stack([info[a]["action_mask"] for a in names]))
            assert info["seeker_0"]["phases"] == {p: float(phases[p][i]) for p in PHASES}
    assert dones.all()


def test_random_play_rarely_shows_the_phases() -> None:
    core = HideAndSeekV1Core(128)
    core.reset(list(range(128)))
    rng = np.random.default_rng(0)
    while core.t[0] < core.max_steps:
        core.step(random_legal(rng, core.action_masks()))
    rates = {k: float(v.mean()) for k, v in core.phases().items()}
    assert set(rates) == set(PHASES)
    assert rates["chasing"] > 0.3 and rates["fort"] < 0.1 and rates["ramp_defense"] < 0.15
    assert rates["ramp_use"] < 0.25


def test_render_shows_ramps() -> None:
    env = HideAndSeekV1Env(HideAndSeekV1Config(n_hiders=1, n_seekers=1, n_boxes=0, prep_fraction=0.0),
                           render_mode="ansi")
    env.reset(options={"layout": ROOM})
    text = env.render()
    assert text.splitlines()[5][2] == "R"
    env.step({"seeker_0": N})
    assert "on ramp: seeker_0" in env.render()
    rgb = HideAndSeekV1Env(render_mode="rgb_array")
    rgb.reset(seed=1)
    assert rgb.render().shape == (9 * 16, 9 * 16, 3)


def test_curriculum_shares_are_drawn_per_episode_from_the_seed() -> None:
    core = HideAndSeekV1Core(1)
    plain = [core.draw_layout(seed) for seed in range(400)]
    assert min(np.abs(lay.ramps[0] - lay.doors[0]).sum() for lay in plain) > 1  # nothing starts by a door
    core.box_by_door, core.ramp_by_door = 0.5, 0.25
    mixed = [core.draw_layout(seed) for seed in range(400)]
    boxes = [not np.array_equal(a.boxes, b.boxes) for a, b in zip(plain, mixed)]
    ramps = [not np.array_equal(a.ramps, b.ramps) for a, b in zip(plain, mixed)]
    assert 0.4 < np.mean(boxes) < 0.6 and 0.15 < np.mean(ramps) < 0.35
    staged = [m for m, moved in zip(mixed, ramps) if moved]
    assert not any(vault_spots(m.walls, m.room, m.doors)[tuple(m.ramps[0])] for m in staged)
    assert np.mean([np.abs(m.ramps[0] - m.doors[0]).sum() == 2 for m in staged]) > 0.9  # straight out, where free
    again = [core.draw_layout(seed) for seed in range(400)]  # the draw is the seed's
    assert all(np.array_equal(a.ramps, b.ramps) and np.array_equal(a.boxes, b.boxes) for a, b in zip(mixed, again))


def test_box_by_door_curriculum_and_fort_potential() -> None:
    for seed in range(4):
        plain = quadrant_layout(9, 2, 2, 2, 1, seed)
        near = quadrant_layout(9, 2, 2, 2, 1, seed, box_by_door=True)
        assert np.array_equal(plain.doors, near.doors) and np.array_equal(plain.hiders, near.hiders)
        gap = np.abs(near.boxes[0] - near.doors[0]).sum()
        assert gap == 1 and near.room[near.boxes[0][0], near.boxes[0][1]]
    rows = list(ROOM)
    rows[2] = "#.Ho#...#"  # a box two cells from the door (3, 4)
    core = core_from(rows)
    far = core.fort_potential()[0]
    assert 0.0 < far < 0.5
    rows[2], rows[3] = "#.H.#...#", "#...o...#"  # the box in the door
    layout = parse_layout(rows)
    layout.doors[:] = [3, 4]
    core.set_layout(0, layout)
    assert core.fort_potential()[0] == 1.0 and core.door_block_status()[0]


def test_vault_spots_are_where_a_ramp_locked_in_place_still_lets_a_seeker_in_and_defends_nothing() -> None:
    # Room rows 1-3, cols 1-3, door (3, 4) on its side wall; the hiders locked the ramp ('p').
    rows = ["#########", "#...#...#", "#.H.#...#", "#...D...#", "#####...#",
            "#.......#", "#.......#", "#.......#", "#########"]
    lay = parse_layout([r.replace(".H.", "...") for r in rows])
    spots = vault_spots(lay.walls, lay.room, lay.doors)
    assert {tuple(c) for c in np.argwhere(spots)} == {(5, 1), (5, 2), (5, 3), (1, 5), (2, 5), (3, 5)}
    for cell, inside in (((5, 2), (3, 2)), ((6, 3), None)):  # a spot by the wall; a cell one further out
        drawn = [list(r) for r in rows]
        drawn[cell[0]][cell[1]], drawn[cell[0] + 1][cell[1]] = "p", "S"  # the seeker south of the ramp
        core = core_from(["".join(r) for r in drawn])
        assert core.phases()["ramp_defense"][0] == (0.0 if inside else 1.0)  # a lock on a vault spot does not count
        step(core, NOOP, N)  # the seeker climbs the locked ramp...
        step(core, NOOP, N)  # ...and moves on north: over the wall into the room, or onto the floor
        assert tuple(core.agent_pos[0, 1]) == (inside if inside else (cell[0] - 1, cell[1]))


def test_ramp_stage_reach_moves_the_ramp_and_the_hider_from_next_to_the_door_to_as_drawn() -> None:
    def apart(reach: float) -> tuple[float, float]:
        gaps = []
        for seed in range(200):
            lay = quadrant_layout(9, 2, 2, 2, 1, seed, ramp_by_door=True, ramp_reach=reach)
            cells = np.concatenate([lay.hiders, lay.boxes, lay.seekers, lay.ramps])
            assert len({tuple(c) for c in cells}) == len(cells)  # nothing shares a cell
            ramp = tuple(lay.ramps[0])
            assert not lay.room[ramp] and not lay.walls[ramp] and not (lay.doors == lay.ramps[0]).all(-1).any()
            assert not vault_spots(lay.walls, lay.room, lay.doors)[ramp]  # a lock in place keeps the seekers out
            to_ramp = steps_from(~lay.walls, lay.ramps[0])
            if reach == 0.0:  # two cells straight out (three where a seeker stands there), the hider next to it
                out = steps_from(~lay.walls & ~lay.room, lay.doors[0])[ramp]
                assert out in (2, 3)
                if out == 2:
                    assert to_ramp[tuple(lay.hiders[0])] == 1 and np.abs(lay.hiders[0] - lay.doors[0]).sum() == 1
            if reach == 1.0:  # hider where the plain draw puts it
                assert np.array_equal(lay.hiders, quadrant_layout(9, 2, 2, 2, 1, seed).hiders)
            gaps.append((np.abs(lay.ramps[0] - lay.doors[0]).sum(), to_ramp[tuple(lay.hiders[0])]))
        return tuple(np.mean(gaps, axis=0))

    spread = [apart(r) for r in (0.0, 0.3, 0.6, 1.0)]
    assert spread[0][0] < 2.1 and spread[0][1] < 1.1  # 2 and 1 but where a seeker stands straight out
    for near, far in itertools.pairwise(spread):
        assert far[0] > near[0] and far[1] > near[1]  # both distances grow with the reach
