"""Replay frames of hide and seek, re-simulated through the registered PettingZoo env.

The record's seed draws the layout (``env.reset(seed=seed % 2**31)``, as the engine and
``arena replay`` do); every cycle of recorded actions is then stepped through the env
and the state of its core (:class:`envs.hide_and_seek.core.HideAndSeekCore`) is read
after reset and after every step:

* static: the walls (rows of ``#``/``.``), the doors of the hiders' room, the length of
  preparation;
* per frame: agents (seat, team, cell, held object), boxes and ramps (cell, lock team
  and the seat that locked it), the seeker -> hider lines of sight, whether a hider was
  seen, and whether the step is in preparation.

Ramps are read as ``hide_and_seek-v1``'s core stores them: extra movable objects after
the boxes in the ``box_*`` arrays, flagged by ``core.is_ramp``; ``core.elevated()``
says which agents stand on one. ``hide_and_seek-v0`` frames have an empty ``ramps``
list and nobody on a ramp.
Who locked an object is not state of the env (only the team is): it is inferred from
the recorded actions (the agent of that team that pressed *lock* next to, or holding,
the object in the step its lock appeared).

Each replay also yields the episode's phase values (:func:`episode_phases`): from
the env's own detectors when it has them (``env.unwrapped.phases()``, v1: chasing, fort,
ramp_use, ramp_defense), else
``chasing`` (share of post-preparation steps in which a seeker saw a hider) and
``fort`` (every door held a box at the end of preparation).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from arena.engine.records import MatchRecord
from envs.registry import get_spec, make_env
from envs.spec import EnvSpec

LOCK_ACTION = 6
TEAM_NAMES = ("hiders", "seekers")


def is_grid_env(env_id: str) -> bool:
    """Whether ``env_id`` is a hide-and-seek grid env (any version)."""
    return env_id.startswith("hide_and_seek-")


def grid_frames(record: MatchRecord) -> dict[str, Any]:
    """Every state of a recorded hide-and-seek match, for the viewer.

    Returns:
        ``{"kind": "grid", "env", "size", "walls", "doors", "prep_steps", "max_steps",
        "agents": [{"seat", "name", "team"}], "frames": [{"step", "prep", "seen",
        "agents": [{"seat", "row", "col", "holding", "on_ramp"}], "boxes": [...],
        "ramps": [...], "sight": [[seeker_seat, hider_seat], ...]}], "phases",
        "has_ramps", "seats", "winner", "termination"}``. Boxes and ramps are
        ``{"id", "ramp", "row", "col", "lock", "locked_by", "held_by"}`` (``id``: the
        object's index, as ``holding`` names it) with ``lock`` ``None``, ``"hiders"``
        or ``"seekers"``.

    Raises:
        ValueError: The actions do not fit the env's cycles.
    """
    with replay_env(record) as (spec, env):
        core = env.unwrapped.core
        lockers = _Lockers(core)
        frames = [_frame(core, lockers)]
        seen_steps = post_prep = 0
        for acts in recorded_cycles(env, record):
            lockers.before(acts)
            env.step({spec.seats[s]: int(a) for s, a in acts.items()})
            lockers.after(acts)
            frame = _frame(core, lockers)
            if frame["step"] > core.prep_steps:  # a step played after preparation
                post_prep += 1
                seen_steps += frame["seen"]
            frames.append(frame)
        phases = episode_phases(env, seen_steps, post_prep)
    agents = [{"seat": s, "name": name, "team": TEAM_NAMES[int(core.team[s])]}
              for s, name in enumerate(spec.seats)]
    return {
        "kind": "grid", "env": record.env, "size": int(core.size),
        "walls": ["".join("#" if w else "." for w in row) for row in core.walls[0]],
        "doors": [list(d) for d in sorted({(int(r), int(c)) for r, c in core.doors[0] if not core.walls[0, r, c]})],
        "prep_steps": int(core.prep_steps), "max_steps": int(core.max_steps), "agents": agents,
        "frames": frames, "phases": phases, "has_ramps": bool(_is_ramp(core).any()),
        "seats": list(record.seats), "winner": record.winner, "termination": record.termination,
    }


@contextmanager
def replay_env(record: MatchRecord) -> Iterator[tuple[EnvSpec, Any]]:
    """The record's registered env, reset with its seed as the engine and ``arena replay``
    do (``seed % 2**31``), and its spec; closed on exit."""
    spec = get_spec(record.env)
    env = make_env(record.env)
    try:
        env.reset(seed=int(record.seed % (2**31)))
        yield spec, env
    finally:
        env.close()


def recorded_cycles(env: Any, record: MatchRecord) -> Iterator[dict[int, int]]:
    """The record's actions one parallel step at a time (``{seat: action}`` of the live seats).

    Stops when the env is done or at an incomplete cycle (a forfeit mid-step: that
    step was never played). The caller steps the env with each cycle.
    """
    actions, i = record.actions, 0
    while i < len(actions) and env.agents:
        live = len(env.agents)
        cycle = actions[i: i + live]
        if len(cycle) < live:
            return
        yield dict(cycle)
        i += live


def episode_phases(env: Any, seen_steps: int, post_prep: int) -> dict[str, float]:
    """Phase values of the episode the env just played (see the module docstring)."""
    own = getattr(env.unwrapped, "phases", None)
    if callable(own):
        return {str(k): float(v) for k, v in own().items()}
    return {"chasing": seen_steps / post_prep if post_prep else 0.0,
            "fort": float(env.unwrapped.door_block_status())}


def match_phases(record: MatchRecord) -> dict[str, float]:
    """The phase values of a recorded hide-and-seek match (re-simulated)."""
    return grid_frames(record)["phases"]


def _is_ramp(core: Any) -> np.ndarray:
    """``(n_objects,)`` bool: which movable objects are ramps (none before v1)."""
    flags = getattr(core, "is_ramp", None)
    return np.zeros(core.n_boxes, dtype=bool) if flags is None else np.asarray(flags[: core.n_boxes], dtype=bool)


def _objects(core: Any, lockers: dict[int, int | None]) -> list[dict[str, Any]]:
    """Every box and ramp of env 0: ``{"id", "ramp", "row", "col", "lock", "locked_by", "held_by"}``."""
    out = []
    for b, ramp in enumerate(_is_ramp(core).tolist()):
        team, holder = int(core.box_lock[0, b]), int(core.box_holder[0, b])
        y, x = core.box_pos[0, b]
        out.append({"id": b, "ramp": ramp, "row": int(y), "col": int(x),
                    "lock": TEAM_NAMES[team] if team >= 0 else None,
                    "locked_by": lockers.get(b) if team >= 0 else None,
                    "held_by": holder if holder >= 0 else None})
    return out


def _frame(core: Any, lockers: _Lockers) -> dict[str, Any]:
    t = int(core.t[0])
    up = core.elevated()[0] if hasattr(core, "elevated") else np.zeros(core.n_agents, dtype=bool)
    agents = [{"seat": a, "row": int(y), "col": int(x), "holding": int(core.holding[0, a]), "on_ramp": bool(up[a])}
              for a, (y, x) in enumerate(core.agent_pos[0])]
    vis = core.visibility()[0]  # recomputed from the state the step left: what the step saw
    team = core.team
    sight = [[int(i), int(j)] for i, j in zip(*np.nonzero(vis)) if team[i] == 1 and team[j] == 0]
    objects = _objects(core, lockers.who)
    return {
        "step": t, "prep": t < core.prep_steps, "seen": bool(core.seen[0]), "agents": agents,
        "boxes": [o for o in objects if not o["ramp"]], "ramps": [o for o in objects if o["ramp"]],
        "sight": sight,
    }


class _Lockers:
    """Which seat locked each box and ramp, inferred from the lock actions of each step."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.who: dict[int, int | None] = {}
        self._locks: list[int] = []
        self._was = np.zeros(0)
        self._touch_before: dict[int, np.ndarray] = {}

    def _touching(self, seat: int) -> np.ndarray:
        """Objects next to the seat's agent (held ones are next to it too), or under it."""
        y, x = self.core.agent_pos[0, seat]
        pos = self.core.box_pos[0, : self.core.n_boxes]
        return (np.abs(pos[:, 0] - y) + np.abs(pos[:, 1] - x)) <= 1

    def before(self, acts: dict[int, int]) -> None:
        """Note, per lock-pressing seat, the objects it touches before the step."""
        self._locks = [s for s, a in acts.items() if a == LOCK_ACTION]
        self._was = self.core.box_lock[0, : self.core.n_boxes].copy()
        self._touch_before = {s: self._touching(s) for s in self._locks}

    def after(self, acts: dict[int, int]) -> None:
        """Credit every newly locked object to a lock-pressing seat of the locking team."""
        team, lock = self.core.team, self.core.box_lock[0, : self.core.n_boxes]
        for b in np.flatnonzero(lock != self._was).tolist():
            if lock[b] < 0:
                self.who.pop(b, None)
                continue
            cands = [s for s in self._locks if team[s] == lock[b]]
            near = [s for s in cands if self._touch_before[s][b] or self._touching(s)[b]]
            self.who[b] = (near or cands or [None])[0]
