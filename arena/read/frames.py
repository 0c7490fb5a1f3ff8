"""Replay frames for the match viewer, computed on the server from the match record.

A record holds the seed and the ordered actions, which is all it takes to rebuild
every intermediate position:

* Board games with a vectorized core (connect four, tictactoe) are re-played one
  ply at a time through that core (a batch of one board). Frames are boards in
  *display* orientation: ``frames[i][row][col]`` with 0 empty and ``seat + 1`` for a
  seat's piece, row 0 at the top. For tictactoe that is the transpose of the core's
  ``(3, 3)`` view, because PettingZoo numbers squares down the columns (``0 | 3 | 6``
  across the top row) and renders them that way.
* ``simple_tag`` is re-played through the real PettingZoo/mpe2 env with the record's
  seed; entity positions are read from ``env.unwrapped.world`` after every cycle.
* Hide and seek (``hide_and_seek-v*``) is re-played through its PettingZoo env; the
  grid, boxes, ramps, locks and lines of sight of every step come from the env's core
  (:mod:`arena.read.grid_frames`).
* Anything else has no visual replay (``{"kind": "none"}``).

The functions here are pure: a record in, plain JSON-ready dicts out. :class:`FrameCache`
keeps the frames of recently viewed matches (the API holds one, ``ApiState.frames``).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np

from arena.core.lru import BuildingLru
from arena.engine.records import MatchRecord
from arena.read.grid_frames import grid_frames, is_grid_env, recorded_cycles, replay_env
from envs.registry import make_vector_core

log = logging.getLogger(__name__)

# Envs replayed through the mpe2 world (particles); board games are found by their core.
PARTICLE_ENVS = frozenset({"simple_tag-v3"})
# Envs whose core view must be transposed to look like PettingZoo's own rendering.
TRANSPOSED_BOARDS = frozenset({"tictactoe-v3"})


def match_frames(record: MatchRecord) -> dict[str, Any]:
    """Every position of a recorded match, for drawing it step by step.

    Args:
        record: The match record (``StoredMatch.to_record()``).

    Returns:
        ``{"kind": "board", ...}`` (see :func:`board_frames`), ``{"kind":
        "particles", ...}`` (see :func:`particle_frames`), ``{"kind": "grid", ...}``
        (see :func:`arena.read.grid_frames.grid_frames`) or ``{"kind": "none",
        "reason": ...}`` when the env has no visual replay or the record cannot be
        re-played (the reason says why).
    """
    try:
        if record.env in PARTICLE_ENVS:
            return particle_frames(record)
        if is_grid_env(record.env):
            return grid_frames(record)
        if make_vector_core(record.env) is not None:
            return board_frames(record)
    except Exception as exc:  # noqa: BLE001 - a bad record must not break the page
        log.warning("cannot build replay frames of match %s: %s", record.match_id, exc)
        return {"kind": "none", "reason": f"the record cannot be re-played: {exc}"}
    return {"kind": "none", "reason": f"{record.env} has no visual replay"}


class FrameCache:
    """Frames of recently viewed matches, so a repeated request does not re-simulate.

    In-process and bounded (least recently used dropped first past ``max_entries``).
    Keyed by the match id and a digest of its whole record, so a record that changed
    (retention emptied its actions) never gets the frames of what it was. Callers
    must not modify the returned dicts: they are shared.

    Attributes:
        hits: Requests answered from the cache.
        misses: Requests that re-simulated the match.
    """

    def __init__(self, max_entries: int = 32) -> None:
        # Sync handlers run on worker threads; a slow replay holds up no other request.
        self._frames: BuildingLru[tuple[str, str], dict[str, Any]] = BuildingLru(max_entries)

    @property
    def max_entries(self) -> int:
        return self._frames.capacity

    @property
    def hits(self) -> int:
        return self._frames.hits

    @property
    def misses(self) -> int:
        return self._frames.misses

    def frames(self, record: MatchRecord) -> dict[str, Any]:
        """:func:`match_frames` of ``record``, from the cache when it was built before."""
        key = (record.match_id, hashlib.sha256(record.to_json().encode()).hexdigest())
        return self._frames.get(key, lambda: match_frames(record))


def board_frames(record: MatchRecord) -> dict[str, Any]:
    """Boards of a two-player board game after every ply.

    Returns:
        ``{"kind": "board", "env", "rows", "cols", "frames", "moves", "illegal",
        "win_cells", "seats", "winner", "termination"}``. ``frames[0]`` is the empty
        board and ``frames[i]`` the board after the ``i``-th move; ``moves[i - 1]`` is
        that move as ``{"seat", "action", "row", "col"}`` (display coordinates). A
        recorded illegal final move is not applied; it is reported in ``illegal``
        instead. ``win_cells`` lists the ``[row, col]`` of the winning line(s).

    Raises:
        ValueError: The record is not a legal sequence of moves.
    """
    core = make_vector_core(record.env)
    if core is None:
        raise ValueError(f"{record.env} has no vectorized board core")
    transpose = record.env in TRANSPOSED_BOARDS
    batch = core.new_batch(1)
    row = np.zeros(1, dtype=np.int64)
    frames = [_display(batch.cells[0], transpose)]
    moves: list[dict[str, int]] = []
    illegal: dict[str, int] | None = None
    width = core.shape[1]
    for i, (seat, action) in enumerate(record.actions):
        if batch.done[0]:
            raise ValueError(f"action {i} was played after the game ended")
        if seat != int(batch.to_move[0]):
            raise ValueError(f"action {i}: seat {seat} moved out of turn")
        legal = core.legal_mask(batch, row)[0]
        if not (0 <= action < len(legal) and legal[action]):
            if i == len(record.actions) - 1 and record.termination == "illegal_action":
                illegal = {"seat": int(seat), "action": int(action)}
                break
            raise ValueError(f"action {i} ({action}) is illegal")
        cell = int(core.target_cells(batch, row, np.array([action]))[0])
        core.play(batch, row, np.array([action]))
        r, c = divmod(cell, width)
        if transpose:
            r, c = c, r
        moves.append({"seat": int(seat), "action": int(action), "row": r, "col": c})
        frames.append(_display(batch.cells[0], transpose))
    rows, cols = len(frames[0]), len(frames[0][0])
    won = bool(moves) and batch.winner[0] >= 0
    win_cells = _winning_line(core, batch, cell, transpose) if won else []
    return {
        "kind": "board", "env": record.env, "rows": rows, "cols": cols, "frames": frames,
        "moves": moves, "illegal": illegal, "win_cells": win_cells, "seats": list(record.seats),
        "winner": record.winner, "termination": record.termination,
    }


def _winning_line(core: Any, batch: Any, last_cell: int, transpose: bool) -> list[list[int]]:
    """Display ``[row, col]`` of the line the final move completed (for highlighting)."""
    flat = batch.cells[0].reshape(-1)
    width = core.shape[1]
    piece = flat[last_cell]
    cells: set[tuple[int, int]] = set()
    for line in core.windows_through[last_cell]:
        if (flat[line] == piece).all():
            for c in line:
                r, col = divmod(int(c), width)
                cells.add((col, r) if transpose else (r, col))
    return [list(rc) for rc in sorted(cells)]


def _display(cells: np.ndarray, transpose: bool) -> list[list[int]]:
    view = cells.T if transpose else cells
    return view.astype(int).tolist()


def particle_frames(record: MatchRecord) -> dict[str, Any]:
    """Positions of every entity of an mpe2 world after reset and after every cycle.

    The env is the registered PettingZoo parallel env, reset with the same seed the
    engine and ``arena replay`` use (``seed % 2**31``); each cycle applies the
    recorded actions of the live seats.

    Returns:
        ``{"kind": "particles", "env", "frames": [{"step", "entities": [{"name", "x",
        "y", "size", "role"}]}], "bounds", "seats", "winner", "termination"}`` where
        ``role`` is ``predator``, ``prey`` or ``obstacle`` and ``bounds`` is the
        largest ``|x|``/``|y|`` reached (plus the entity's size), for scaling.

    Raises:
        ValueError: The actions do not fit the env's cycles.
    """
    with replay_env(record) as (spec, env):
        world = env.unwrapped.world
        frames = [_world_frame(world, 0)]
        for step, cycle in enumerate(recorded_cycles(env, record), 1):
            env.step({spec.seats[s]: int(a) for s, a in cycle.items()})
            frames.append(_world_frame(world, step))
    bound = max(
        (max(abs(e["x"]), abs(e["y"])) + e["size"] for f in frames for e in f["entities"]),
        default=1.0,
    )
    return {
        "kind": "particles", "env": record.env, "frames": frames, "bounds": round(bound, 4),
        "seats": list(record.seats), "winner": record.winner, "termination": record.termination,
    }


def _world_frame(world: Any, step: int) -> dict[str, Any]:
    entities = []
    for agent in world.agents:
        role = "predator" if getattr(agent, "adversary", False) else "prey"
        entities.append(_entity(agent, role))
    for landmark in world.landmarks:
        entities.append(_entity(landmark, "obstacle"))
    return {"step": step, "entities": entities}


def _entity(entity: Any, role: str) -> dict[str, Any]:
    x, y = (float(v) for v in entity.state.p_pos)
    return {"name": str(entity.name), "x": round(x, 4), "y": round(y, 4),
            "size": float(entity.size), "role": role}
