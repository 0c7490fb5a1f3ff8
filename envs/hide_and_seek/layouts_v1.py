"""Layouts of ``hide_and_seek-v1``: v0's grid plus ramps and the hiders' room as a mask.

Two random layout families, both drawn from a seed:

* :func:`quadrant_layout` (the default, after OpenAI's quadrant game): the hiders' room
  fills one quadrant of the grid (a ``(size // 2 - 1)``-square inside, e.g. 3x3 on the
  default 9x9 grid) in a random corner, with one or two one-cell doors in its walls.
  Hiders and boxes start inside, seekers and the ramps outside; nothing starts in a
  doorway or next to one.
* :func:`random_room_layout`: v0's random room (random size, corner and doors, half the
  boxes inside) with the ramps placed outside.

Character map of :func:`parse_layout` (v0's, :mod:`envs.hide_and_seek.layouts`, plus ramps)::

    R  ramp           p  ramp locked by the hiders     q  ramp locked by the seekers
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek.layouts import Layout
from envs.hide_and_seek.rules import HIDERS, MOVES, SEEKERS, UNLOCKED

LAYOUTS = ("quadrant", "random")


@dataclass
class LayoutV1(Layout):
    """A v0 :class:`~envs.hide_and_seek.layouts.Layout` plus ramps and the room.

    Attributes:
        ramps: ``(n_ramps, 2)`` start cells.
        ramp_locks: ``(n_ramps,)`` int8: ``-1`` unlocked, else the locking team.
        room: ``(size, size)`` bool, the inside of the hiders' room (doors excluded).
    """

    ramps: np.ndarray
    ramp_locks: np.ndarray
    room: np.ndarray


def quadrant_room(size: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]], list[tuple[int, int]]]:
    """The quadrant's closed room before its doors: ``(walls, room, bottom, side)``, the
    border and the room's two inner walls, its cells, and the wall cells a door may open on
    its bottom and on its side."""
    m = size // 2
    walls = np.zeros((size, size), dtype=bool)
    walls[0, :] = walls[-1, :] = walls[:, 0] = walls[:, -1] = True
    walls[m, : m + 1] = True
    walls[: m + 1, m] = True
    room = np.zeros_like(walls)
    room[1:m, 1:m] = True
    return walls, room, [(m, c) for c in range(1, m)], [(r, m) for r in range(1, m)]


def quadrant_layout(
    size: int, n_hiders: int, n_seekers: int, n_boxes: int, n_ramps: int, seed: int,
    n_doors: int | None = None, box_by_door: bool = False, ramp_by_door: bool = False,
    ramp_reach: float = 0.0,
) -> LayoutV1:
    """Draw a quadrant layout (see the module docstring) from ``seed``.

    Args:
        n_doors: ``None``: one or two doors drawn from ``seed``; ``1`` or ``2`` forces it.
        box_by_door: Training curriculum: box ``i`` starts on the room cell next to door
            ``i`` (one push from blocking it); nothing else about the draw changes.
        ramp_by_door: Training curriculum: the first ramp starts near the first door and
            the first hider on the way to it (see :func:`place_ramp_stage`).
        ramp_reach: How far, in ``[0, 1]``, when ``ramp_by_door``: 0 puts the ramp two
            cells outside the door and the hider next to it, between them (one action
            from locking it, two steps from coming back in); 1 is the standard draw.
    """
    rng = np.random.default_rng(seed)
    walls, room, bottom, side = quadrant_room(size)
    one_door = rng.integers(2) == 0 if n_doors is None else n_doors == 1
    walls, room, doors = grid.open_doors(rng, walls, room, bottom, side, bool(one_door))
    near = grid.near_doors(walls.shape, doors)
    inside = np.flatnonzero(room & ~near)
    outside = np.flatnonzero(~room & ~walls & ~near)
    ins = rng.choice(inside, n_hiders + n_boxes, replace=False)
    outs = rng.choice(outside, n_seekers + n_ramps, replace=False)
    cells = np.stack(np.unravel_index(np.concatenate([ins, outs]), walls.shape), -1).astype(np.int64)
    k = n_hiders + n_boxes
    if box_by_door:
        distinct = doors[:1] if (doors[0] == doors[1]).all() else doors
        for i, door in enumerate(distinct[:n_boxes]):
            by = door + MOVES
            by = by[((by >= 0) & (by < size)).all(-1)]
            cells[n_hiders + i] = by[room[by[:, 0], by[:, 1]]][0]
    if ramp_by_door and n_ramps:
        place_ramp_stage(walls, room, doors, cells, k, n_seekers, ramp_reach, seed)
    return LayoutV1(
        walls=np.ascontiguousarray(walls),
        doors=doors.astype(np.int64),
        hiders=cells[:n_hiders],
        seekers=cells[k : k + n_seekers],
        boxes=cells[n_hiders:k],
        box_locks=np.full(n_boxes, UNLOCKED, dtype=np.int8),
        ramps=cells[k + n_seekers :],
        ramp_locks=np.full(n_ramps, UNLOCKED, dtype=np.int8),
        room=np.ascontiguousarray(room),
    )


def steps_from(free: np.ndarray, start) -> np.ndarray:
    """Breadth-first steps from ``start`` over the ``free`` cells (``-1``: unreachable)."""
    dist = np.full(free.shape, -1, dtype=np.int64)
    dist[tuple(start)] = 0
    todo = deque([tuple(int(v) for v in start)])
    while todo:
        y, x = todo.popleft()
        for my, mx in MOVES:
            cell = (y + int(my), x + int(mx))
            if 0 <= cell[0] < free.shape[0] and 0 <= cell[1] < free.shape[1] and free[cell] and dist[cell] < 0:
                dist[cell] = dist[y, x] + 1
                todo.append(cell)
    return dist


def vault_spots(walls: np.ndarray, room: np.ndarray, doors: np.ndarray) -> np.ndarray:
    """``(size, size)`` bool: the floor cells outside the room from which an agent on a ramp
    vaults into the room with one move (into a wall, or into a door's box, landing on a room
    cell). A ramp locked by the hiders on such a cell still lets the seekers in: it counts for
    the ``ramp_defense`` detector only off these cells."""
    size = walls.shape[0]
    blocks = walls.copy()
    blocks[doors[:, 0], doors[:, 1]] = True  # a fort's box stands there
    blocks, inside = np.pad(blocks, 2), np.pad(room, 2)
    spots = np.zeros_like(walls)
    for dy, dx in MOVES:  # the cell one move on blocks, the one beyond it is the room's
        spots |= blocks[2 + dy : 2 + dy + size, 2 + dx : 2 + dx + size] \
            & inside[2 + 2 * dy : 2 + 2 * dy + size, 2 + 2 * dx : 2 + 2 * dx + size]
    return spots & ~walls & ~room


def place_ramp_stage(
    walls: np.ndarray, room: np.ndarray, doors: np.ndarray, cells: np.ndarray,
    k: int, n_seekers: int, reach: float, seed: int, vault: np.ndarray | None = None,
) -> None:
    """The ramp stage of the training curriculum, in place on a quadrant draw's ``cells``
    (hiders, boxes, seekers, ramps in that order; ``k`` hiders and boxes).

    The first ramp moves to an outside cell ``2 .. 2 + reach * (D - 2)`` (rounded) steps
    from the first door, ``D`` the farthest outside cell's, drawn from ``seed`` (a stream
    of its own; never a door, a seeker's cell or one of :func:`vault_spots`, where a ramp
    locked in place would not keep the seekers out; when the range holds none, it reaches
    out to the nearest distance that does); the first hider moves onto its shortest
    way there (walls only count), ``start = 0 .. ramp = L``, at index
    ``round((1 - reach) * (L - 1))`` (or the nearest free cell back towards its start).
    Reach 0: the ramp two cells straight out from the door (where it is free), the hider
    between them, next to it;
    reach 1: the ramp on any outside cell, the hider where it was drawn.
    ``vault``: the layout's :func:`vault_spots`, where the caller has them already.
    """
    reach = min(1.0, max(0.0, float(reach)))
    outside = ~walls & ~room
    from_door = steps_from(outside, doors[0])
    most = int(from_door.max())
    vault = vault_spots(walls, room, doors) if vault is None else vault
    free = outside & (from_door >= 2) & ~vault
    free[doors[:, 0], doors[:, 1]] = False
    free[cells[k : k + n_seekers, 0], cells[k : k + n_seekers, 1]] = False
    if not free.any():
        return
    spots = free & (from_door <= max(2 + round(reach * (most - 2)), int(from_door[free].min())))
    rng = np.random.default_rng([int(seed), 5])
    ramp = np.unravel_index(rng.choice(np.flatnonzero(spots)), walls.shape)
    cells[k + n_seekers] = ramp
    to_hider = steps_from(~walls, cells[0])
    way = [np.array(ramp)]  # back from the ramp to the hider's start
    while to_hider[tuple(way[-1])] > 0:
        way.append(next(c for c in way[-1] + MOVES if to_hider[tuple(c)] == to_hider[tuple(way[-1])] - 1))
    way = way[::-1]  # start = 0 .. ramp = L
    taken = {tuple(c) for c in np.delete(cells, [0, k + n_seekers], axis=0)}
    for j in range(round((1.0 - reach) * (len(way) - 2)), -1, -1):
        if tuple(way[j]) not in taken:
            cells[0] = way[j]
            return


def room_mask(walls: np.ndarray, doors: np.ndarray) -> np.ndarray:
    """The hiders' room: the smallest floor region next to the first door, doors closed.

    A layout without doors (``doors`` on a wall) has no room (all False).
    """
    room = np.zeros_like(walls, dtype=bool)
    if walls[doors[0, 0], doors[0, 1]]:
        return room
    closed = walls.copy()
    closed[doors[:, 0], doors[:, 1]] = True
    for dy, dx in MOVES:
        start = (int(doors[0, 0] + dy), int(doors[0, 1] + dx))
        if not (0 <= start[0] < len(walls) and 0 <= start[1] < len(walls)) or closed[start]:
            continue
        region = steps_from(~closed, start) >= 0
        if not room.any() or region.sum() < room.sum():
            room = region
    return room


def random_room_layout(
    size: int, n_hiders: int, n_seekers: int, n_boxes: int, n_ramps: int, seed: int,
    n_doors: int | None = None, box_by_door: bool = False,
) -> LayoutV1:
    """v0's random layout of ``seed`` (:func:`envs.hide_and_seek.layouts.random_layout`), ramps
    added outside the room (away from doors and everything else) from a second stream."""
    base = grid.random_layout(size, n_hiders, n_seekers, n_boxes, seed, n_doors, box_by_door)
    room = room_mask(base.walls, base.doors)
    free = ~room & ~base.walls & ~grid.near_doors(base.walls.shape, base.doors)
    for cells in (base.hiders, base.seekers, base.boxes):
        free[cells[:, 0], cells[:, 1]] = False
    rng = np.random.default_rng([seed, 1])
    picks = rng.choice(np.flatnonzero(free), n_ramps, replace=False)
    ramps = np.stack(np.unravel_index(picks, free.shape), -1).astype(np.int64).reshape(-1, 2)
    return LayoutV1(**vars(base), ramps=ramps, ramp_locks=np.full(n_ramps, UNLOCKED, dtype=np.int8),
                    room=room)


def parse_layout(rows: list[str] | str) -> LayoutV1:
    """Read a hand-drawn layout: v0's characters plus ``R``/``p``/``q`` ramps (module docstring).

    The room is :func:`room_mask` of the drawn walls and doors.
    """
    if isinstance(rows, str):
        rows = rows.split()
    ramp_chars = {"R": UNLOCKED, "p": HIDERS, "q": SEEKERS}
    base = grid.parse_layout([r.translate(str.maketrans("Rpq", "...")) for r in rows])
    chars = np.array([list(r) for r in rows])
    is_ramp = np.isin(chars, list(ramp_chars))
    return LayoutV1(
        **vars(base),
        ramps=np.argwhere(is_ramp).astype(np.int64).reshape(-1, 2),
        ramp_locks=np.array([ramp_chars[c] for c in chars[is_ramp]], dtype=np.int8),
        room=room_mask(base.walls, base.doors),
    )
