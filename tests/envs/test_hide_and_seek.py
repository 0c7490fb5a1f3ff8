"""hide_and_seek-v0: sight, boxes and locks, preparation, rewards, determinism, rendering.

Scenarios are hand-drawn layouts (``parse_layout``'s character map: ``#`` wall, ``H``
hider, ``S`` seeker, ``o`` box, ``D`` door of the hiders' room). PettingZoo's own
``parallel_api_test`` / ``parallel_seed_test`` run on the registered env in
``test_api.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.env import HideAndSeekEnv
from envs.hide_and_seek.layouts import parse_layout, random_layout
from envs.hide_and_seek.rules import CHANNELS, GRAB, HIDERS, LOCK, NOOP, SEEKERS, UNLOCKED

N, E, S, W = 1, 2, 3, 4
OPEN = "#########"
EMPTY = "#.......#"


def core_from(rows: list[str], **kwargs) -> HideAndSeekCore:
    """A one-env core started from ``rows`` (no preparation unless asked for)."""
    layout = parse_layout(rows)
    kwargs = {"prep_fraction": 0.0, **kwargs}
    config = HideAndSeekConfig(size=len(rows), n_hiders=len(layout.hiders), n_seekers=len(layout.seekers),
                               n_boxes=len(layout.boxes), **kwargs)
    core = HideAndSeekCore(1, config)
    core.set_layout(0, layout)
    return core


def step(core: HideAndSeekCore, *actions: int):
    return core.step(np.array([actions]))


def board(middle: str, **kwargs) -> HideAndSeekCore:
    """9x9 open room, ``middle`` as row 4 (hider_0 is agent 0, seeker_0 agent 1)."""
    return core_from([OPEN, EMPTY, EMPTY, EMPTY, middle, EMPTY, EMPTY, EMPTY, OPEN], **kwargs)


def random_legal(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per (env, agent) from ``(..., 7)`` masks."""
    scores = rng.random(masks.shape) * masks
    return scores.argmax(-1)


# ------------------------------------------------------------------ vision
@pytest.mark.parametrize(
    ("middle", "seen"),
    [
        ("#S.....H#", True),  # clear line, distance 6
        ("#S..#..H#", False),  # a wall between
        ("#S..o..H#", False),  # a box between
    ],
)
def test_walls_and_boxes_block_sight(middle: str, seen: bool) -> None:
    core = board(middle)
    vis = core.visibility()[0]
    assert vis[1, 0] == seen and vis[0, 1] == seen
    assert core.seen[0] == seen


def test_vision_radius_is_respected() -> None:
    assert not board("#S.....H#", vision_radius=5).visibility()[0, 1, 0]
    assert board("#S.....H#", vision_radius=6).visibility()[0, 1, 0]
    # Diagonal (4, 4) is at distance 5.66: inside radius 6, outside radius 5.
    rows = [OPEN, "#S......#", EMPTY, EMPTY, EMPTY, "#....H..#", EMPTY, EMPTY, OPEN]
    assert core_from(rows, vision_radius=6).visibility()[0, 1, 0]
    assert not core_from(rows, vision_radius=5).visibility()[0, 1, 0]


def test_sight_is_symmetric_on_random_layouts() -> None:
    core = HideAndSeekCore(16, HideAndSeekConfig(n_hiders=3, n_seekers=3, n_boxes=4))
    core.reset(list(range(16)))
    rng = np.random.default_rng(0)
    for _ in range(30):
        core.step(random_legal(rng, core.action_masks()))
        vis = core.visibility()
        assert (vis == vis.transpose(0, 2, 1)).all()


def test_only_opponents_in_sight_are_observed() -> None:
    planes = len(CHANNELS)
    clear = board("#..S..H.#").observe()[0, 0, : planes * 81].reshape(planes, 9, 9)
    assert clear[CHANNELS.index("visible_opponents")][4, 1] == 1  # seeker 3 cells west
    assert clear[CHANNELS.index("visible_opponents")].sum() == 1
    hidden = board("#..So.H.#").observe()[0, 0, : planes * 81].reshape(planes, 9, 9)
    assert hidden[CHANNELS.index("visible_opponents")].sum() == 0
    assert hidden[CHANNELS.index("boxes")][4, 2] == 1
    walls = hidden[CHANNELS.index("walls")]  # east wall 2 cells away, beyond it off-grid
    assert walls[4, 6:].all() and not walls[4, :6].any() and walls[0].all()


# ----------------------------------------------------------- boxes and locks
def test_grabbed_box_is_pushed_pulled_and_dragged() -> None:
    core = board("#.Ho...S#")
    assert not core.action_masks()[0, 0, E]  # a box blocks a free-handed move
    step(core, E, NOOP)
    assert core.agent_pos[0, 0].tolist() == [4, 2]
    step(core, GRAB, NOOP)
    assert core.holding[0, 0] == 0
    step(core, E, NOOP)  # push
    assert core.agent_pos[0, 0].tolist() == [4, 3] and core.box_pos[0, 0].tolist() == [4, 4]
    step(core, W, NOOP)  # pull
    assert core.agent_pos[0, 0].tolist() == [4, 2] and core.box_pos[0, 0].tolist() == [4, 3]
    step(core, S, NOOP)  # drag sideways
    assert core.agent_pos[0, 0].tolist() == [5, 2] and core.box_pos[0, 0].tolist() == [5, 3]
    step(core, GRAB, NOOP)  # release: the box stays behind
    step(core, W, NOOP)
    assert core.agent_pos[0, 0].tolist() == [5, 1] and core.box_pos[0, 0].tolist() == [5, 3]


def test_contested_cell_goes_to_the_agent_whose_turn_comes_first() -> None:
    """Within a step agents act in turn; the first mover rotates every step."""
    core = board("#..H.S..#")
    step(core, E, W)  # t=0: hider acts first and takes the middle cell
    assert core.agent_pos[0].tolist() == [[4, 4], [4, 5]]
    core = board("#..H.S..#")
    step(core, NOOP, NOOP)
    step(core, E, W)  # t=1: the seeker acts first
    assert core.agent_pos[0].tolist() == [[4, 3], [4, 4]]


def test_box_cannot_be_pushed_into_a_wall() -> None:
    core = board("#...S.Ho#")
    step(core, GRAB, NOOP)
    assert not core.action_masks()[0, 0, E]
    step(core, E, NOOP)
    assert core.agent_pos[0, 0].tolist() == [4, 6] and core.box_pos[0, 0].tolist() == [4, 7]


def test_locked_box_cannot_be_moved_and_only_its_team_unlocks_it() -> None:
    core = board("#.HoS...#")
    step(core, LOCK, NOOP)
    assert core.box_lock[0, 0] == HIDERS
    masks = core.action_masks()[0]
    assert not masks[0, GRAB] and not masks[0, E]  # hider: no grab, no push
    assert not masks[1, GRAB] and not masks[1, LOCK] and not masks[1, W]  # seeker: nothing
    step(core, E, GRAB)  # illegal actions act as noop
    step(core, NOOP, LOCK)
    assert core.box_lock[0, 0] == HIDERS and core.box_pos[0, 0].tolist() == [4, 3]
    assert core.agent_pos[0].tolist() == [[4, 2], [4, 4]]
    step(core, LOCK, NOOP)  # the hiders unlock it
    assert core.box_lock[0, 0] == UNLOCKED
    step(core, NOOP, LOCK)  # now the seekers lock it, and the hiders cannot unlock
    assert core.box_lock[0, 0] == SEEKERS
    assert not core.action_masks()[0, 0, LOCK]
    step(core, LOCK, NOOP)
    assert core.box_lock[0, 0] == SEEKERS


def test_locking_a_held_box_releases_it() -> None:
    core = board("#.Ho...S#")
    step(core, GRAB, NOOP)
    step(core, LOCK, NOOP)
    assert core.box_lock[0, 0] == HIDERS and core.holding[0, 0] == -1
    assert core.box_holder[0, 0] == -1


# ------------------------------------------------------ preparation, rewards
def test_preparation_freezes_seekers_then_team_rewards_are_zero_sum() -> None:
    env = HideAndSeekEnv()
    _, infos = env.reset(seed=11)
    assert env.core.prep_steps == 24
    rng = np.random.default_rng(0)
    seekers = ["seeker_0", "seeker_1"]
    for t in range(env.core.max_steps):
        if t < env.core.prep_steps:
            assert all(infos[a]["action_mask"].tolist() == [1, 0, 0, 0, 0, 0, 0] for a in seekers)
        start = env.core.agent_pos[0, 2:].copy()
        actions = {
            a: int(random_legal(rng, infos[a]["action_mask"].astype(bool))) for a in env.agents
        }
        actions.update({a: int(rng.integers(1, 7)) for a in seekers})  # try to act anyway
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert all(env.observation_space(a).contains(o) for a, o in obs.items())
        if t < env.core.prep_steps:
            assert (env.core.agent_pos[0, 2:] == start).all()
            assert set(rewards.values()) == {0.0}
        else:
            hider = -1.0 if infos["hider_0"]["hiders_seen"] else 1.0
            assert rewards == {
                "hider_0": hider,
                "hider_1": hider,
                "seeker_0": -hider,
                "seeker_1": -hider,
            }
    assert all(terms.values()) and not any(truncs.values()) and env.agents == []


# ------------------------------------------------------------- determinism
def play(seed: int) -> tuple[list[str], list[np.ndarray]]:
    """Renders and (observations, rewards) of one episode of random actions."""
    env = HideAndSeekEnv(render_mode="ansi")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    frames, arrays = [env.render()], [np.stack(list(obs.values()))]
    while env.agents:
        obs, rewards, *_ = env.step({a: int(rng.integers(7)) for a in env.agents})
        frames.append(env.render())
        arrays += [np.stack(list(obs.values())), np.array(list(rewards.values()))]
    return frames, arrays


def test_same_seed_same_layout_and_trajectory() -> None:
    (frames_a, arrays_a), (frames_b, arrays_b) = play(5), play(5)
    assert frames_a == frames_b and len(frames_a) == 61
    assert all(np.array_equal(x, y) for x, y in zip(arrays_a, arrays_b, strict=True))
    assert len(set(frames_a)) > 10  # the agents did move
    env = HideAndSeekEnv(render_mode="ansi")
    layouts = {(env.reset(seed=seed), env.render())[1] for seed in range(6)}
    assert len(layouts) >= 5


def test_batched_core_equals_single_envs() -> None:
    seeds = [3, 14, 15, 92, 65, 35, 89, 79]
    core = HideAndSeekCore(8)
    obs, masks = core.reset(seeds)
    envs = [HideAndSeekEnv() for _ in seeds]
    singles = [env.reset(seed=s) for env, s in zip(envs, seeds)]
    names = envs[0].possible_agents
    for i, (o, info) in enumerate(singles):
        assert np.array_equal(obs[i], np.stack([o[a] for a in names]))
        assert np.array_equal(masks[i], np.stack([info[a]["action_mask"] for a in names]))
    rng = np.random.default_rng(1)
    for _ in range(core.max_steps):
        # Mostly legal actions, some arbitrary ones (which must act as noop in both).
        actions = np.where(
            rng.random((8, 4)) < 0.8, random_legal(rng, masks), rng.integers(0, 7, (8, 4))
        )
        obs, rewards, dones, masks = core.step(actions)
        for i, env in enumerate(envs):
            o, r, term, _, info = env.step(dict(zip(names, actions[i].tolist())))
            assert np.array_equal(obs[i], np.stack([o[a] for a in names]))
            assert rewards[i].tolist() == [r[a] for a in names]
            assert dones[i] == term["hider_0"]
            assert np.array_equal(masks[i], np.stack([info[a]["action_mask"] for a in names]))
    assert dones.all()


def test_reset_of_some_rows_leaves_the_others() -> None:
    core = HideAndSeekCore(3)
    core.reset([1, 2, 3])
    core.step(np.zeros((3, 4), dtype=np.int64))
    before = core.agent_pos.copy()
    core.reset([7], rows=np.array([1]))
    assert core.t.tolist() == [1, 0, 1]
    assert np.array_equal(core.agent_pos[[0, 2]], before[[0, 2]])


# ----------------------------------------------------- rendering, door block
def test_render_rgb_array_and_ansi() -> None:
    env = HideAndSeekEnv(render_mode="rgb_array")
    env.reset(seed=0)
    img = env.render()
    assert img.shape == (15 * 16, 15 * 16, 3) and img.dtype == np.uint8
    assert len(np.unique(img.reshape(-1, 3), axis=0)) >= 4
    env = HideAndSeekEnv(render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    lines = text.splitlines()
    assert len(lines) == 16 and all(len(r) == 15 for r in lines[:15])
    grid = "".join(lines[:15])
    assert grid.count("H") == 2 and grid.count("S") == 2 and grid.count("o") == 2
    assert lines[0] == "#" * 15 and lines[-1] == "step 0/60 preparation"
    with pytest.warns(UserWarning):
        assert HideAndSeekEnv().render() is None


ROOM = [
    "#########",
    "#...#...#",
    "#.H.#...#",
    "#.o.#...#",
    "#...#...#",
    "##D##...#",
    "#.......#",
    "#.....S.#",
    "#########",
]


@pytest.mark.parametrize(
    ("script", "doors", "blocked", "locked"),
    [
        ((GRAB, S, S, LOCK), 1, True, True),  # box pushed into the door and locked
        ((GRAB, S, S, NOOP), 1, True, False),  # pushed, not locked
        ((NOOP, NOOP, NOOP, NOOP), 1, False, False),
        ((GRAB, S, S, LOCK), 2, False, False),  # a second door stays open
    ],
)
def test_door_block_status(script: tuple, doors: int, blocked: bool, locked: bool) -> None:
    rows = list(ROOM)
    if doors == 2:
        rows[2] = "#.H.D...#"
    env = HideAndSeekEnv(HideAndSeekConfig(size=9, n_hiders=1, n_seekers=1, n_boxes=1, max_steps=10))
    env.reset(seed=0, options={"layout": rows})
    assert not env.door_block_status()
    for action in script:
        env.step({"hider_0": action, "seeker_0": NOOP})
    assert env.core.t[0] == env.core.prep_steps == 4
    assert env.door_block_status() == blocked
    assert env.door_block_status(locked=True) == locked
    # The status is the end-of-preparation snapshot: later moves do not change it.
    env.step({"hider_0": LOCK if locked else GRAB, "seeker_0": NOOP})
    env.step({"hider_0": GRAB, "seeker_0": NOOP})
    env.step({"hider_0": N, "seeker_0": NOOP})
    assert env.door_block_status() == blocked


def test_no_door_starts_blocked() -> None:
    core = HideAndSeekCore(32)
    core.reset(list(range(32)))
    assert not core.door_block_status().any()


def reachable(walls: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """Cells reachable from ``start`` through non-wall cells (flood fill)."""
    seen = np.zeros_like(walls)
    stack = [start]
    while stack:
        y, x = stack.pop()
        if walls[y, x] or seen[y, x]:
            continue
        seen[y, x] = True
        stack += [(y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)]
    return seen


@pytest.mark.parametrize("seed", range(0, 400, 20))
def test_random_layouts_close_the_room_but_for_its_doors(seed: int) -> None:
    layout = random_layout(15, 2, 2, 3, seed)
    cells = np.concatenate([layout.hiders, layout.seekers, layout.boxes])
    assert len({tuple(c) for c in cells}) == len(cells)
    assert not layout.walls[cells[:, 0], cells[:, 1]].any()
    assert not layout.walls[layout.doors[:, 0], layout.doors[:, 1]].any()
    hider = tuple(layout.hiders[0])
    shut = layout.walls.copy()
    shut[layout.doors[:, 0], layout.doors[:, 1]] = True
    room = reachable(shut, hider)
    assert room[layout.hiders[:, 0], layout.hiders[:, 1]].all()
    assert not room[layout.seekers[:, 0], layout.seekers[:, 1]].any()
    assert room[layout.boxes[:, 0], layout.boxes[:, 1]].sum() == 2  # ceil(3 / 2) inside
    assert reachable(layout.walls, hider)[layout.seekers[:, 0], layout.seekers[:, 1]].all()


def test_bad_configurations_and_layouts_are_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        HideAndSeekCore(1, HideAndSeekConfig(size=7))
    with pytest.raises(ValueError, match="odd"):
        HideAndSeekCore(1, HideAndSeekConfig(view_size=8))
    with pytest.raises(ValueError, match="room"):
        HideAndSeekCore(1, HideAndSeekConfig(n_hiders=12, n_boxes=6))
    env = HideAndSeekEnv(HideAndSeekConfig(size=9, n_hiders=1, n_seekers=1, n_boxes=2))
    with pytest.raises(ValueError, match="this core needs"):
        env.reset(options={"layout": ROOM})  # one box drawn, two expected
    with pytest.raises(ValueError, match="unknown layout characters"):
        parse_layout(["###", "#x#", "###"])


def test_boxless_and_larger_teams_play_to_the_end() -> None:
    for kwargs in ({"n_boxes": 0}, {"n_hiders": 3, "n_seekers": 1, "n_boxes": 3, "size": 11}):
        core = HideAndSeekCore(4, HideAndSeekConfig(**kwargs))
        obs, masks = core.reset([0, 1, 2, 3])
        rng = np.random.default_rng(0)
        total, dones = np.zeros((4, core.n_agents)), np.zeros(4, dtype=bool)
        while not dones.all():
            obs, rewards, dones, masks = core.step(random_legal(rng, masks))
            total += rewards
        assert obs.shape == (4, core.n_agents, core.obs_dim) and dones.all()
        hiders = total[:, : core.n_hiders]
        assert (hiders == hiders[:, :1]).all() and (
            total[:, core.n_hiders :] == -hiders[:, :1]
        ).all()
