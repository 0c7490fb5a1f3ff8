"""Is ramp defense feasible? Planned hider teams played in ``hide_and_seek-v1``'s own core.

:func:`feasibility` draws standard layouts (the registered env's quadrant draw, one per
seed), plans each with :class:`agents.hide_and_seek.planner.TeamPlanner` and plays every
plan found in the real numpy core (:class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`,
the same class and detectors the benchmarks read) through the preparation phase. A
task counts as done in a layout only when the core says so at the end of preparation:

* ``fort``: the core's ``fort`` detector (every door holds a box);
* ``ramp_defense``: the core's ``ramp_defense`` detector (the ramp inside the room, or
  locked by the hiders off the vault spots, where no seeker climbs it into the room);
* ``both``: both, in one episode, one hider building while the other defends.

Each at two levels: ``detectors`` (exactly the above) and ``sealed`` (also the door
boxes locked by the hiders, ``door_block_status(locked=True)``, and both hiders inside
the room when preparation ends: what the game's reward needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agents.hide_and_seek import model as rules
from agents.hide_and_seek.planner import TeamPlanner
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core

LEVELS = ("detectors", "sealed")
TASKS = {"fort": (True, False), "ramp_defense": (False, True), "both": (True, True)}
POST_PREPARATION = 30
"""Steps after preparation in v1 (50 steps, 40% preparation); kept when preparation is lengthened."""


def make_core(n: int, prep_steps: int | None = None) -> HideAndSeekV1Core:
    """A standard ``hide_and_seek-v1`` core of ``n`` episodes; ``prep_steps`` other than v1's 20
    lengthens the episode to ``prep_steps + 30`` steps (v1's defaults are not changed)."""
    if prep_steps is None:
        return HideAndSeekV1Core(n)
    steps = prep_steps + POST_PREPARATION
    core = HideAndSeekV1Core(n, HideAndSeekV1Config(max_steps=steps, prep_fraction=prep_steps / steps))
    if core.prep_steps != prep_steps:
        raise ValueError(f"cannot set {prep_steps} preparation steps")
    return core


def play_plans(core: HideAndSeekV1Core, plans: Sequence[tuple[list[int], ...] | None]) -> dict[str, np.ndarray]:
    """Play one plan per loaded episode (``None``: the hiders stand still) through preparation.

    Returns:
        Per episode, from the core at the end of preparation: ``fort``,
        ``ramp_defense`` (its phase detectors), ``locked`` (every door's box locked by
        the hiders) and ``inside`` (every hider in the room); bool arrays.
    """
    if len(plans) != core.n_envs:
        raise ValueError(f"{len(plans)} plans for {core.n_envs} episodes")
    actions = np.zeros((core.prep_steps, core.n_envs, core.n_agents), dtype=np.int64)
    for row, plan in enumerate(plans):
        for hider, acts in enumerate(plan or ()):
            acts = acts[: core.prep_steps]
            actions[: len(acts), row, hider] = acts
    for t in range(core.prep_steps):
        core.step(actions[t])
    phases = core.phases()
    hiders = core.agent_pos[:, : core.n_hiders]
    rows = np.arange(core.n_envs)[:, None]
    return {"fort": phases["fort"] > 0.5, "ramp_defense": phases["ramp_defense"] > 0.5,
            "locked": core.door_block_status(locked=True),
            "inside": core.room[rows, hiders[..., 0], hiders[..., 1]].all(1)}


def done(outcome: dict[str, np.ndarray], task: str, level: str) -> np.ndarray:
    """Episodes in which ``task`` was done at ``level`` (see the module docstring)."""
    ok = np.ones_like(outcome["fort"])
    if task in ("fort", "both"):
        ok &= outcome["fort"] & (outcome["locked"] if level == "sealed" else True)
    if task in ("ramp_defense", "both"):
        ok &= outcome["ramp_defense"]
    return ok & (outcome["inside"] if level == "sealed" else True)


@dataclass
class LayoutReport:
    """What the planner found on one layout."""

    seed: int
    ramp_from_door: int
    """walls-only steps from the nearest door to the ramp"""
    plans: dict[tuple[str, str], tuple[list[int], ...] | None] = field(default_factory=dict)
    """(level, task) -> the team's plan"""
    alone_steps: dict[tuple[str, str], int | None] = field(default_factory=dict)
    """(level, task) -> fewest steps of the better hider doing the task alone (None: over the horizon)"""
    bound_both: dict[str, bool] = field(default_factory=dict)
    """level -> one hider can build the fort alone and the other defend the ramp alone in time"""
    done: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(level, task) -> the core confirmed it"""


def plan_layout(core: HideAndSeekV1Core, seed: int, max_states: int = 20_000,
                levels: Sequence[str] = LEVELS) -> tuple[LayoutReport, dict]:
    """Plan every task at ``levels`` on the layout of ``seed``; returns the report and the search stats."""
    board, world = rules.from_layout(core.draw_layout(seed))
    planner = TeamPlanner(board, world, core.prep_steps, max_states)
    ramp = world.objects[board.is_ramp.index(True)]
    report = LayoutReport(seed, min(planner.dist.between(d, ramp) for d in board.doors))
    hiders = range(len(world.agents))
    for level in levels:
        sealed = level == "sealed"
        for task, (fort, ramp_task) in TASKS.items():
            report.plans[level, task] = planner.plan(sealed, fort, ramp_task)
        for task, name in (("fort", "fort"), ("ramp", "ramp_defense")):
            lengths = [len(p) for h in hiders if (p := planner.alone_plan(h, task, sealed)) is not None]
            report.alone_steps[level, name] = min(lengths, default=None)
        report.bound_both[level] = any(planner.alone_plan(h, "fort", sealed) is not None
                                       and planner.alone_plan(1 - h, "ramp", sealed) is not None for h in hiders)
    return report, planner.stats


def feasibility(seeds: Sequence[int], prep_steps: int | None = None, max_states: int = 20_000,
                levels: Sequence[str] = LEVELS) -> dict:
    """Rates over the standard layouts of ``seeds`` (see the module docstring).

    Returns:
        ``layouts``, ``prep_steps``, ``max_steps``, per level ``<task>_rate`` for each of
        :data:`TASKS` (``sealed_`` prefixed for the sealed level),
        ``bound_both_rate`` (one hider can build the fort alone and the other defend
        the ramp alone, in time: the team's rate is at most this), ``mismatches``
        (plans the planning model expected to succeed that the core did not confirm;
        0 unless the model is wrong), ``capped`` (searches that gave up),
        ``ramp_from_door`` and ``alone_steps`` summaries, and ``reports`` (the
        :class:`LayoutReport` per seed).
    """
    core = make_core(len(seeds), prep_steps)
    reports, capped = [], 0
    for seed in seeds:
        report, stats = plan_layout(core, int(seed), max_states, levels)
        reports.append(report)
        capped += stats.get("capped", 0)
    out: dict = {"layouts": len(seeds), "prep_steps": core.prep_steps, "max_steps": core.max_steps}
    mismatches = 0
    for level in levels:
        prefix = "" if level == "detectors" else "sealed_"
        for task in TASKS:
            plans = [r.plans[level, task] for r in reports]
            core.reset(np.asarray(seeds))
            outcome = play_plans(core, plans)
            ok = done(outcome, task, level)
            mismatches += int(sum(p is not None and not o for p, o in zip(plans, ok)))
            for r, o in zip(reports, ok):
                r.done[level, task] = bool(o)
            out[f"{prefix}{task}_rate"] = round(float(ok.mean()), 4)
        out[f"{prefix}bound_both_rate"] = round(float(np.mean([r.bound_both[level] for r in reports])), 4)
    out["mismatches"], out["capped"] = mismatches, capped
    out["ramp_from_door"] = summary([r.ramp_from_door for r in reports])
    out["alone_steps"] = {f"{lv}_{task}": summary([r.alone_steps[lv, task] for r in reports])
                          for lv in levels for task in ("fort", "ramp_defense")}
    out["reports"] = reports
    return out


def preparation_needed(reports: Sequence[LayoutReport], level: str, target: float = 0.9, start: int = 20,
                       stop: int = 40, step: int = 2, max_states: int = 20_000) -> dict[int, float]:
    """``both`` rates at ``level`` with longer preparations, until one reaches ``target``.

    A layout done with ``p`` preparation steps stays done with more (one more step of
    standing still changes no detector), so only the layouts not done are planned again.

    Returns:
        Preparation steps -> rate, from ``start`` (read from ``reports``) on.
    """
    left = [r.seed for r in reports if not r.done[level, "both"]]
    rates = {start: round(1 - len(left) / len(reports), 4)}
    prep = start
    while rates[prep] < target and prep < stop and left:
        prep += step
        again = feasibility(left, prep, max_states, levels=(level,))["reports"]
        left = [r.seed for r in again if not r.done[level, "both"]]
        rates[prep] = round(1 - len(left) / len(reports), 4)
    return rates


def summary(values: Sequence[int | None]) -> dict:
    """Mean, median, 90th percentile and max of the values found, and how many were not (``None``)."""
    found = np.array([v for v in values if v is not None], dtype=float)
    if found.size == 0:
        return {"mean": None, "median": None, "p90": None, "max": None, "over": len(values)}
    return {"mean": round(float(found.mean()), 2), "median": float(np.median(found)),
            "p90": float(np.percentile(found, 90)), "max": int(found.max()), "over": len(values) - found.size}
