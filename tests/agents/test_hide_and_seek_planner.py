"""Planned hider teams in ``hide_and_seek-v1``: the planning model is the core's rules, and
the plans do in the real core what the planner says (fort and ramp defense by the env's detectors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents.hide_and_seek import model as rules
from agents.hide_and_seek.feasibility import feasibility, make_core, play_plans
from agents.hide_and_seek.planner import TeamPlanner
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.layouts_v1 import parse_layout, vault_spots
from envs.hide_and_seek.rules import HIDERS

# The ramp two steps from the door: one hider blocks the door, the other locks the ramp.
NEAR = """
#########
#Ho.#...#
#H.o#...#
#...D.R.#
#####...#
#.......#
#.....S.#
#.S.....#
#########
"""
# A hider outside, next to a ramp between the room's wall and a box: climbing and vaulting.
VAULTS = """
#########
#o..#...#
#.H.D.H.#
#...#Ro.#
#####...#
#.......#
#.......#
#...S..S#
#########
"""


def far_ramp(size: int = 15) -> list[str]:
    """The quadrant room of a ``size`` grid with the ramp in the far corner (about 23 steps away)."""
    m = size // 2
    grid = [["#" if r in (0, size - 1) or c in (0, size - 1) else "." for c in range(size)] for r in range(size)]
    for i in range(m + 1):
        grid[m][i] = grid[i][m] = "#"
    grid[2][m] = "D"
    for (r, c), ch in {(1, 1): "H", (2, 1): "H", (1, 2): "o", (3, 2): "o", (m + 2, size - 2): "S",
                       (m + 3, size - 2): "S", (size - 2, size - 2): "R"}.items():
        grid[r][c] = ch
    return ["".join(row) for row in grid]


def world_of(core: HideAndSeekV1Core, row: int) -> rules.World:
    """The core's state of episode ``row`` in the planning model's terms."""
    size, h = core.size, core.n_hiders
    return rules.World(tuple(int(y) * size + int(x) for y, x in core.agent_pos[row, :h]),
                       tuple(int(y) * size + int(x) for y, x in core.box_pos[row]),
                       tuple(int(v) for v in core.box_lock[row]), tuple(int(v) for v in core.holding[row, :h]))


@pytest.mark.parametrize("source", ["standard", "vaults"])
def test_the_planning_model_steps_as_the_core_does(source: str) -> None:
    n, steps = 48, 20
    core = HideAndSeekV1Core(n, HideAndSeekV1Config(max_steps=40, prep_fraction=0.5))
    if source == "standard":
        core.reset(np.arange(n))
        layouts = [core.draw_layout(s) for s in range(n)]
    else:
        layouts = [parse_layout(VAULTS)] * n
        for row in range(n):
            core.set_layout(row, layouts[row])
    pairs = [rules.from_layout(layout) for layout in layouts]
    worlds = [w for _, w in pairs]
    rng = np.random.default_rng(7)
    vaults = 0
    for t in range(steps):
        acts = rng.choice(7, size=(n, core.n_hiders), p=[0.1, 0.18, 0.18, 0.18, 0.18, 0.09, 0.09])
        full = np.zeros((n, core.n_agents), dtype=np.int64)
        full[:, : core.n_hiders] = acts
        core.step(full)
        vaults += int(core.vaulted.sum())
        for row, (board, _) in enumerate(pairs):
            worlds[row] = rules.step(board, worlds[row], tuple(int(a) for a in acts[row]), t)
            assert worlds[row] == world_of(core, row), (source, row, t)
    if source == "vaults":
        assert vaults > 0  # the layout did exercise vaulting


def test_a_near_ramp_gets_both_the_fort_and_ramp_defense_in_the_core() -> None:
    layout = parse_layout(NEAR)
    board, world = rules.from_layout(layout)
    core = HideAndSeekV1Core(2)
    planner = TeamPlanner(board, world, core.prep_steps)
    plans = [planner.plan(sealed=False), planner.plan(sealed=True)]
    assert all(p is not None for p in plans)
    for row in range(2):
        core.set_layout(row, layout)
    out = play_plans(core, plans)
    assert out["fort"].all() and out["ramp_defense"].all()
    assert out["locked"][1] and out["inside"][1]  # sealed: door boxes locked, both hiders back in
    assert not play_plans(_loaded(layout), [None])["fort"][0]  # standing still does nothing


def _loaded(layout, **kwargs) -> HideAndSeekV1Core:
    core = HideAndSeekV1Core(1, HideAndSeekV1Config(size=len(layout.walls), **kwargs))
    core.set_layout(0, layout)
    return core


def test_a_far_ramp_is_out_of_reach_in_preparation_but_not_in_a_longer_one() -> None:
    layout = parse_layout(far_ramp())
    board, world = rules.from_layout(layout)
    core = _loaded(layout)
    planner = TeamPlanner(board, world, core.prep_steps)
    assert core.prep_steps == 20
    assert planner.plan(sealed=False) is None
    assert all(planner.alone_plan(h, "ramp", sealed=False) is None for h in range(2))
    fort_only = planner.plan(sealed=False, fort=True, ramp=False)
    out = play_plans(core, [fort_only])
    assert out["fort"][0] and not out["ramp_defense"][0]
    longer = _loaded(layout, max_steps=60, prep_fraction=0.5)  # 30 preparation steps
    plan = TeamPlanner(board, world, longer.prep_steps).plan(sealed=False)
    assert plan is not None
    out = play_plans(longer, [plan])
    assert out["fort"][0] and out["ramp_defense"][0]


def test_a_ramp_locked_on_a_vault_spot_defends_nothing_in_the_model_as_in_the_core() -> None:
    rows = ["#########", "#...#...#", "#.H.#...#", "#...D...#", "#####...#",
            "#.......#", "#.......#", "#.....S.#", "#########"]
    for cell, locked, defended in (((5, 2), "p", False), ((6, 3), "p", True), ((6, 3), "R", False)):
        drawn = [list(r) for r in rows]
        drawn[cell[0]][cell[1]] = locked  # by the room's wall; one further out; one further out, unlocked
        layout = parse_layout(["".join(r) for r in drawn])
        board, world = rules.from_layout(layout)
        assert rules.ramps_defended(board, world) == defended
        core = _loaded(layout, n_hiders=1, n_seekers=1, n_boxes=0)
        assert bool(core.ramps_defended()[0]) == defended


def test_a_ramp_left_on_a_vault_spot_is_not_defended_when_preparation_ends() -> None:
    core = make_core(1)
    on = []
    for seed in range(60):  # standard draws: about one in seven starts the ramp on a vault spot
        lay = core.draw_layout(seed)
        if vault_spots(lay.walls, lay.room, lay.doors)[tuple(lay.ramps[0])]:
            on.append(seed)
    core = make_core(1)
    core.reset(np.array(on[:1]))
    core.box_lock[0, core.is_ramp] = HIDERS  # locked where it stands, by the room's wall
    assert not play_plans(core, [None])["ramp_defense"][0]


def test_rates_come_from_the_played_episodes() -> None:
    seeds = [10, 14, 37]  # quick to plan; 37's ramp hider cannot be back inside in time
    report = feasibility(seeds)
    assert report["layouts"] == 3 and report["prep_steps"] == 20 and report["mismatches"] == 0
    assert report["fort_rate"] == report["ramp_defense_rate"] == report["both_rate"] == 1.0
    assert report["sealed_both_rate"] == pytest.approx(2 / 3, abs=1e-3)
    short = feasibility(seeds, prep_steps=3)
    assert short["prep_steps"] == 3 and short["both_rate"] == 0.0 and short["sealed_both_rate"] == 0.0


def test_the_scripted_benchmark_prints_its_json_keys_last() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "hide_and_seek.py"
    run = subprocess.run([sys.executable, str(script), "--scripted", "--smoke"], capture_output=True, text=True,
                         timeout=300, check=True)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert {"env", "layouts", "steps", "prep_steps", "fort_rate", "ramp_defense_rate", "both_rate", "bound_both_rate",
            "sealed_both_rate", "ramp_from_door", "prep_for_0_9", "mismatches", "capped", "max_states"} <= set(result)
    assert result["env"] == "hide_and_seek-v1" and result["layouts"] == 6 and result["mismatches"] == 0


@pytest.mark.parametrize("states", ["0", "-5"])
def test_the_scripted_benchmark_refuses_a_search_cap_below_one(states: str, capsys) -> None:
    """``--max-states 0`` used to read as "the default" (20,000): a cap that means nothing is refused
    before any search runs."""
    from benchmarks.hide_and_seek import main

    with pytest.raises(SystemExit) as exit_:
        main(["--scripted", "--max-states", states])
    assert exit_.value.code == 2
    assert "--max-states must be at least 1" in capsys.readouterr().err
