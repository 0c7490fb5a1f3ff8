"""Grid geometry of ``hide_and_seek-v0``: layouts, line of sight, observation windows.

A layout is the static part of an episode (walls, the doors of the hiders' room) plus
where agents and boxes start. :func:`random_layout` draws one from a seed;
:func:`parse_layout` reads a hand-written one (tests, scripted scenarios).

Character map shared by :func:`parse_layout` and the ``ansi`` renderer::

    #  wall            .  floor           D  door of the hiders' room (floor)
    H  hider           S  seeker          o  box
    h  box locked by the hiders           s  box locked by the seekers

:func:`sight_table` precomputes, for every offset within the vision radius, the cells
strictly between an observer and a target, so that :func:`line_of_sight` tests every
pair of agents in every env with one gather. Functions here take plain arrays with a
leading ``n_envs`` axis; the state lives in :class:`envs.hide_and_seek.core.HideAndSeekCore`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from envs.hide_and_seek.rules import HIDERS, MOVES, SEEKERS, UNLOCKED


@dataclass
class Layout:
    """One episode's start.

    Attributes:
        walls: ``(size, size)`` bool, the outer walls included.
        doors: ``(2, 2)`` door cells (row, col) of the hiders' room; a one-door room
            repeats its door, a layout without doors points both at the corner wall
            ``(0, 0)`` (never blocked).
        hiders: ``(n_hiders, 2)`` start cells.
        seekers: ``(n_seekers, 2)`` start cells.
        boxes: ``(n_boxes, 2)`` start cells.
        box_locks: ``(n_boxes,)`` int8: ``-1`` unlocked, else the locking team.
    """

    walls: np.ndarray
    doors: np.ndarray
    hiders: np.ndarray
    seekers: np.ndarray
    boxes: np.ndarray
    box_locks: np.ndarray


def room_size_range(size: int) -> tuple[int, int]:
    """Smallest and largest inner side of the hiders' room on a ``size`` grid."""
    lo = max(3, (size - 2) // 3)
    return lo, max(lo, (size - 2) // 2)


def random_layout(
    size: int, n_hiders: int, n_seekers: int, n_boxes: int, seed: int,
    n_doors: int | None = None, box_by_door: bool = False, seekers_by_door: bool = False,
) -> Layout:
    """Draw a layout: a walled room with 1-2 doors in a random corner.

    Hiders and ``ceil(n_boxes / 2)`` boxes start inside the room, seekers and the other
    boxes outside; nothing starts in a doorway or on a cell next to one, so no door
    starts blocked.

    Args:
        n_doors: ``None`` (default): one or two doors, drawn from ``seed``; ``1`` or
            ``2`` forces that many (a training curriculum). The random stream is
            consumed the same way in every case, so a seed whose drawn door count
            already matches gives the very same layout.
        box_by_door: Move the first box that starts in the room onto the room cell
            next to the (first) door (a training curriculum; the door itself stays
            open). Nothing else about the draw changes.
        seekers_by_door: Start the seekers on the free cells outside the room nearest
            to the (first) door, so that even an untrained seeker soon looks in (a
            training curriculum). Nothing else about the draw changes.
    """
    if n_doors not in (None, 1, 2):
        raise ValueError(f"n_doors must be None, 1 or 2, got {n_doors!r}")
    rng = np.random.default_rng(seed)
    walls = np.zeros((size, size), dtype=bool)
    walls[0, :] = walls[-1, :] = walls[:, 0] = walls[:, -1] = True
    lo, hi = room_size_range(size)
    rh, rw = (int(v) for v in rng.integers(lo, hi + 1, size=2))
    room = np.zeros_like(walls)
    room[1 : rh + 1, 1 : rw + 1] = True
    walls[rh + 1, 1 : rw + 2] = True
    walls[1 : rh + 1, rw + 1] = True
    bottom = [(rh + 1, c) for c in range(1, rw + 1)]
    side = [(r, rw + 1) for r in range(1, rh + 1)]
    one_door = rng.integers(2) == 0
    if n_doors is not None:
        one_door = n_doors == 1
    walls, room, doors = open_doors(rng, walls, room, bottom, side, bool(one_door))
    near_door = near_doors(walls.shape, doors)
    inside = np.flatnonzero(room & ~near_door)
    outside = np.flatnonzero(~room & ~walls & ~near_door)
    n_in = (n_boxes + 1) // 2
    ins = rng.choice(inside, n_hiders + n_in, replace=False)
    outs = rng.choice(outside, n_seekers + n_boxes - n_in, replace=False)
    cells = np.stack(np.unravel_index(np.concatenate([ins, outs]), walls.shape), -1)
    hiders, boxes_in = cells[:n_hiders], cells[n_hiders : n_hiders + n_in]
    seekers, boxes_out = cells[len(ins) : len(ins) + n_seekers], cells[len(ins) + n_seekers :]
    if box_by_door and n_in > 0:
        by_door = doors[0] + MOVES
        boxes_in[0] = by_door[room[by_door[:, 0], by_door[:, 1]]][0]
    if seekers_by_door:
        free = ~room & ~walls
        free[boxes_out[:, 0], boxes_out[:, 1]] = False
        free[doors[:, 0], doors[:, 1]] = False
        cells_out = np.argwhere(free)
        dist = np.abs(cells_out - doors[0]).sum(1)
        seekers = cells_out[np.argsort(dist, kind="stable")[:n_seekers]]
    return Layout(
        walls=np.ascontiguousarray(walls),
        doors=doors.astype(np.int64),
        hiders=hiders.astype(np.int64),
        seekers=seekers.astype(np.int64),
        boxes=np.concatenate([boxes_in, boxes_out]).astype(np.int64),
        box_locks=np.full(n_boxes, UNLOCKED, dtype=np.int8),
    )


def open_doors(
    rng: np.random.Generator, walls: np.ndarray, room: np.ndarray,
    bottom: list[tuple[int, int]], side: list[tuple[int, int]], one_door: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Open one door (anywhere on the room's walls) or two (one per wall), then turn the
    grid so the room lies in a random corner. Returns ``(walls, room, doors)``."""
    size = len(walls)
    if one_door:
        both = bottom + side
        door = both[int(rng.integers(len(both)))]
        doors = np.array([door, door], dtype=np.int64)
    else:
        doors = np.array([bottom[int(rng.integers(len(bottom)))], side[int(rng.integers(len(side)))]])
    walls[doors[:, 0], doors[:, 1]] = False
    corner = int(rng.integers(4))
    if corner & 1:
        walls, room = walls[::-1], room[::-1]
        doors[:, 0] = size - 1 - doors[:, 0]
    if corner & 2:
        walls, room = walls[:, ::-1], room[:, ::-1]
        doors[:, 1] = size - 1 - doors[:, 1]
    return walls, room, doors


def near_doors(shape: tuple[int, ...], doors: np.ndarray) -> np.ndarray:
    """Door cells and their four neighbours (clipped to the grid)."""
    near = np.zeros(shape, dtype=bool)
    for dy, dx in np.vstack([[0, 0], MOVES]):
        near[np.clip(doors[:, 0] + dy, 0, shape[0] - 1), np.clip(doors[:, 1] + dx, 0, shape[1] - 1)] = True
    return near


def parse_layout(rows: list[str] | str) -> Layout:
    """Read a square layout drawn with the character map of this module's docstring.

    Agents and boxes are numbered in reading order (``hider_0`` is the first ``H``).
    The border must be walls.

    Raises:
        ValueError: Ragged or non-square rows, an unknown character, an open border or
            more than two doors.
    """
    if isinstance(rows, str):
        rows = rows.split()
    size = len(rows)
    if any(len(r) != size for r in rows):
        raise ValueError(f"layout must be square, got rows of lengths {[len(r) for r in rows]}")
    grid = np.array([list(r) for r in rows])
    unknown = set(grid.ravel()) - set("#.DHSohs")
    if unknown:
        raise ValueError(f"unknown layout characters {sorted(unknown)}; use '#.DHSohs'")
    walls = grid == "#"
    if not (walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()):
        raise ValueError("the layout's border must be walls ('#')")
    doors = np.argwhere(grid == "D")
    if len(doors) > 2:
        raise ValueError(f"at most two doors ('D'), got {len(doors)}")
    doors = np.zeros((2, 2), np.int64) if len(doors) == 0 else doors[[0, len(doors) - 1]]
    box_cells = np.isin(grid, list("ohs"))
    locks = {"o": UNLOCKED, "h": HIDERS, "s": SEEKERS}
    return Layout(
        walls=walls,
        doors=doors.astype(np.int64),
        hiders=np.argwhere(grid == "H").astype(np.int64),
        seekers=np.argwhere(grid == "S").astype(np.int64),
        boxes=np.argwhere(box_cells).astype(np.int64),
        box_locks=np.array([locks[c] for c in grid[box_cells]], dtype=np.int8),
    )


def bresenham(y1: int, x1: int) -> list[tuple[int, int]]:
    """Cells of Bresenham's line from ``(0, 0)`` to ``(y1, x1)``, both ends included."""
    y, x = 0, 0
    dx, dy = abs(x1), -abs(y1)
    sx, sy = (1 if x1 > 0 else -1), (1 if y1 > 0 else -1)
    err = dx + dy
    cells = [(0, 0)]
    while (y, x) != (y1, x1):
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x += sx
        if e2 <= dx:
            err += dx
            y += sy
        cells.append((y, x))
    return cells


def sight_table(radius: int) -> tuple[np.ndarray, np.ndarray]:
    """Line-of-sight lookup for offsets ``(dy, dx)`` with ``|dy|, |dx| <= radius``.

    The cells between observer and target are the union of Bresenham's line drawn from
    each end, so sight is symmetric (a hider sees a seeker iff it is seen by it) and a
    straight wall has no gaps: each Bresenham step changes the row (column) by at most
    one, so a line crossing a wall row visits a cell in it.

    Returns:
        ``in_range`` ``(2r+1, 2r+1)`` bool: the offset is within the Euclidean radius;
        ``between`` ``(2r+1, 2r+1, L, 2)`` int64: offsets of the cells strictly between
        observer and target, padded with ``(0, 0)`` (the observer's own cell, which
        never blocks sight).
    """
    span = range(-radius, radius + 1)
    lines: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for dy in span:
        for dx in span:
            there = bresenham(dy, dx)
            back = [(dy + y, dx + x) for y, x in bresenham(-dy, -dx)]
            inner = set(there[1:-1]) | set(back[1:-1])
            lines[dy, dx] = sorted(inner)
    width = max(1, max(len(v) for v in lines.values()))
    side = 2 * radius + 1
    between = np.zeros((side, side, width, 2), dtype=np.int64)
    in_range = np.zeros((side, side), dtype=bool)
    for (dy, dx), cells in lines.items():
        if cells:
            between[dy + radius, dx + radius, : len(cells)] = cells
        in_range[dy + radius, dx + radius] = dy * dy + dx * dx <= radius * radius
    return in_range, between


def line_of_sight(
    pos: np.ndarray, blocks: np.ndarray, in_range: np.ndarray, between: np.ndarray
) -> np.ndarray:
    """Which agents see which.

    Args:
        pos: ``(n, agents, 2)`` agent cells.
        blocks: ``(n, size, size)`` bool, cells that block sight (walls, boxes).
        in_range, between: :func:`sight_table` of the vision radius.

    Returns:
        ``vis`` ``(n, agents, agents)`` bool: ``vis[e, i, j]``, agent ``i`` sees agent
        ``j`` (never itself).
    """
    near, _, blocked = sight_cells(pos, blocks, in_range, between)
    return near & ~blocked.any(-1)


def sight_cells(
    pos: np.ndarray, blocks: np.ndarray, in_range: np.ndarray, between: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of :func:`line_of_sight`, for rules that look at single cells on a line.

    Returns:
        ``near`` ``(n, agents, agents)``: the target is within the radius (never the
        observer itself); ``offsets`` ``(n, agents, agents, L, 2)``: the cells strictly
        between, relative to the observer (padding ``(0, 0)``); ``blocked``
        ``(n, agents, agents, L)``: which of them block sight (meaningful where ``near``).
    """
    rad = (len(in_range) - 1) // 2
    rel = pos[:, None, :, :] - pos[:, :, None, :]  # target minus observer
    idx = np.clip(rel, -rad, rad) + rad
    near = (np.abs(rel) <= rad).all(-1) & in_range[idx[..., 0], idx[..., 1]]
    offsets = between[idx[..., 0], idx[..., 1]]
    cells = np.clip(pos[:, :, None, None, :] + offsets, 0, blocks.shape[-1] - 1)  # far pairs: masked by near
    rows = np.arange(len(pos))[:, None, None, None]
    blocked = blocks[rows, cells[..., 0], cells[..., 1]]
    agents = np.arange(pos.shape[1])
    near[:, agents, agents] = False
    return near, offsets, blocked


def windows(maps: np.ndarray, pos: np.ndarray, order: np.ndarray, view_size: int) -> np.ndarray:
    """Egocentric windows of ``maps`` around every agent.

    Args:
        maps: ``(n, channels, size, size)`` bool; channel 0 (walls) reads as True beyond
            the grid, the others as False.
        pos: ``(n, agents, 2)`` agent cells.
        order: ``(agents, k)`` which map channels each agent sees, in its order.
        view_size: Odd window side.

    Returns:
        ``(n, agents, k, view_size, view_size)`` bool.
    """
    half = view_size // 2
    maps = np.pad(maps, ((0, 0), (0, 0), (half, half), (half, half)))
    if half:
        maps[:, 0, :half] = maps[:, 0, -half:] = True
        maps[:, 0, :, :half] = maps[:, 0, :, -half:] = True
    views = sliding_window_view(maps, (view_size, view_size), axis=(2, 3))
    rows = np.arange(len(pos))[:, None, None]
    return views[rows, order, pos[..., 0, None], pos[..., 1, None]]
