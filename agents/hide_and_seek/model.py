"""A planning copy of ``hide_and_seek-v1``'s preparation rules: the hiders' moves, one world at a time.

The planner (:mod:`agents.hide_and_seek.planner`) searches hundreds of thousands of
states per layout, one at a time, which the batched numpy core
(:class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`) is not made for. This module
restates the core's rules for the preparation phase as plain functions on small
tuples, line for line (``tests/agents/test_hide_and_seek_planner.py`` steps it beside
the core on random actions and compares every array), and every plan the planner
reports is played again in the real core, whose detectors have the last word.

Preparation only: seekers are frozen (static obstacles) and nobody is rewarded. A
:class:`World` holds the hiders (team :data:`HIDERS`) and the movable objects (boxes,
then ramps, as the core numbers them). Cells are flat indices ``row * size + col``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from envs.hide_and_seek.layouts_v1 import LayoutV1, vault_spots
from envs.hide_and_seek.rules import GRAB, HIDERS, LOCK, NOOP, UNLOCKED

__all__ = ["Board", "World", "from_layout"]


class World(NamedTuple):
    """The movable state: hider cells, object cells, object locks, the object each hider holds (-1)."""

    agents: tuple[int, ...]
    objects: tuple[int, ...]
    locks: tuple[int, ...]
    holding: tuple[int, ...]


@dataclass(frozen=True)
class Board:
    """The static part of a layout, and the seekers (frozen during preparation)."""

    size: int
    walls: tuple[bool, ...]
    is_ramp: tuple[bool, ...]
    seekers: frozenset[int]
    room: frozenset[int]
    doors: tuple[int, ...]
    """the room's distinct door cells"""
    n_agents: int
    """hiders and seekers: the core's turn order rotates over all of them"""
    vault_spots: frozenset[int] = frozenset()
    """outside cells from which a ramp vaults into the room (:func:`envs.hide_and_seek.layouts_v1.vault_spots`)"""

    moves: tuple[int, int, int, int] = ()
    """flat steps of the move actions 1-4: north, east, south, west"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "moves", (-self.size, 1, self.size, -1))


def from_layout(layout: LayoutV1) -> tuple[Board, World]:
    """The board and the starting world of a ``hide_and_seek-v1`` layout."""
    size = len(layout.walls)

    def flat(cells: np.ndarray) -> tuple[int, ...]:
        return tuple(int(y) * size + int(x) for y, x in np.asarray(cells).reshape(-1, 2))

    boxes, ramps = flat(layout.boxes), flat(layout.ramps)
    board = Board(
        size=size, walls=tuple(bool(w) for w in layout.walls.ravel()),
        is_ramp=(False,) * len(boxes) + (True,) * len(ramps), seekers=frozenset(flat(layout.seekers)),
        room=frozenset(int(c) for c in np.flatnonzero(layout.room)), doors=tuple(sorted(set(flat(layout.doors)))),
        n_agents=len(layout.hiders) + len(layout.seekers),
        vault_spots=frozenset(int(c) for c in np.flatnonzero(vault_spots(layout.walls, layout.room, layout.doors))))
    locks = tuple(int(v) for v in np.concatenate([layout.box_locks, layout.ramp_locks]))
    hiders = flat(layout.hiders)
    return board, World(hiders, boxes + ramps, locks, (-1,) * len(hiders))


def object_at(world: World, cell: int) -> int:
    """The object on ``cell`` (``-1``: none)."""
    objects = world.objects
    return objects.index(cell) if cell in objects else -1


def agent_at(board: Board, world: World, cell: int) -> int:
    """The hider on ``cell``, ``-2`` for a seeker, ``-1`` for nobody."""
    agents = world.agents
    if cell in agents:
        return agents.index(cell)
    return -2 if cell in board.seekers else -1


def holder(world: World, obj: int) -> int:
    """The hider holding object ``obj`` (``-1``: none)."""
    holding = world.holding
    return holding.index(obj) if obj in holding else -1


def _carried(board: Board, world: World, a: int, ahead: int) -> int:
    """The object a move carries: the one held, else a box pushed (core ``_carried``)."""
    hold = world.holding[a]
    if hold >= 0:
        return hold
    o = object_at(world, ahead)
    if o >= 0 and not board.is_ramp[o] and world.locks[o] == UNLOCKED and holder(world, o) < 0:
        return o
    return -1


def _move(board: Board, world: World, a: int, d: int, agents_block: bool) -> tuple[bool, int, int]:
    """``(ok, new cell, carried object)`` of hider ``a`` moving ``d`` (core ``_move``, ``action_masks``)."""
    step = board.moves[d]
    pos, hold = world.agents[a], world.holding[a]
    ahead = pos + step
    box = _carried(board, world, a, ahead)
    obj = object_at(world, ahead)
    ramp_ok = obj >= 0 and board.is_ramp[obj] and holder(world, obj) < 0 and box < 0
    walk = not board.walls[ahead] and (obj < 0 or obj == box or ramp_ok)
    if agents_block:
        walk = walk and agent_at(board, world, ahead) in (-1, a)
    if walk and box >= 0:
        beyond = world.objects[box] + step
        other = object_at(world, beyond)
        walk = not board.walls[beyond] and (other < 0 or other == box)
        if agents_block:
            walk = walk and agent_at(board, world, beyond) in (-1, a)
    if walk:
        return True, ahead, box
    # vault from a ramp over a wall or a box (core ``_vault_to``)
    row, col = divmod(pos, board.size)
    dy, dx = ((-1, 0), (0, 1), (1, 0), (0, -1))[d]
    land = pos + 2 * step
    if not (0 <= row + 2 * dy < board.size and 0 <= col + 2 * dx < board.size):
        return False, pos, -1
    under = object_at(world, pos)
    barrier = board.walls[ahead] or (obj >= 0 and not board.is_ramp[obj])
    ok = under >= 0 and board.is_ramp[under] and hold < 0 and barrier
    ok = ok and not board.walls[land] and object_at(world, land) < 0
    if agents_block:
        ok = ok and agent_at(board, world, land) < 0
    # the core moves a carried box along with a vault too; a vault never carries one (the push would walk)
    return ok, land, box if ok else -1


def _targets(board: Board, world: World, a: int) -> tuple[int, int]:
    """First adjacent object hider ``a`` may grab, and may lock or unlock (core ``_targets``)."""
    pos, grab, toggle = world.agents[a], -1, -1
    for step in board.moves:
        o = object_at(world, pos + step)
        if o < 0:
            continue
        stood_on = board.is_ramp[o] and agent_at(board, world, pos + step) != -1
        free = world.locks[o] == UNLOCKED and holder(world, o) < 0 and not stood_on
        if free and grab < 0:
            grab = o
        if (free or world.locks[o] == HIDERS) and toggle < 0:
            toggle = o
    return grab, toggle


def legal(board: Board, world: World, a: int, action: int) -> bool:
    """The core's action mask of hider ``a`` (other agents ignored, as there)."""
    if 1 <= action <= 4:
        return _move(board, world, a, action - 1, agents_block=False)[0]
    if action in (GRAB, LOCK):
        grab, toggle = _targets(board, world, a)
        return world.holding[a] >= 0 or (grab if action == GRAB else toggle) >= 0
    return action == NOOP


def act(board: Board, world: World, a: int, action: int) -> World:
    """Hider ``a`` takes ``action`` (already found legal at the start of the step)."""
    agents, objects, locks, holding = world
    if 1 <= action <= 4:
        ok, cell, box = _move(board, world, a, action - 1, agents_block=True)
        if not ok:
            return world
        agents = agents[:a] + (cell,) + agents[a + 1:]
        if box >= 0:
            objects = objects[:box] + (objects[box] + board.moves[action - 1],) + objects[box + 1:]
        return World(agents, objects, locks, holding)
    if action == GRAB:
        if holding[a] >= 0:
            return World(agents, objects, locks, holding[:a] + (-1,) + holding[a + 1:])
        grab, _ = _targets(board, world, a)
        return world if grab < 0 else World(agents, objects, locks, holding[:a] + (grab,) + holding[a + 1:])
    if action == LOCK:
        target = holding[a] if holding[a] >= 0 else _targets(board, world, a)[1]
        if target < 0:
            return world
        new = HIDERS if locks[target] == UNLOCKED else UNLOCKED
        return World(agents, objects, locks[:target] + (new,) + locks[target + 1:],
                     holding[:a] + (-1,) + holding[a + 1:])
    return world


def step(board: Board, world: World, actions: tuple[int, ...], t: int) -> World:
    """One preparation step of the hiders' ``actions`` (core ``step``: masks first, then turns)."""
    actions = tuple(x if x == NOOP or legal(board, world, a, x) else NOOP for a, x in enumerate(actions))
    for k in range(board.n_agents):
        a = (t + k) % board.n_agents
        if a < len(actions) and actions[a] != NOOP:
            world = act(board, world, a, actions[a])
    return world


def fort(board: Board, world: World, locked: bool = False) -> bool:
    """Every door holds a box (a ramp does not count), locked by the hiders if ``locked``."""
    for door in board.doors:
        o = object_at(world, door)
        if o < 0 or board.is_ramp[o] or (locked and world.locks[o] != HIDERS):
            return False
    return True


def ramps_defended(board: Board, world: World) -> bool:
    """Every ramp is inside the room, or locked by the hiders off the vault spots: no seeker can
    climb in by one (core ``ramps_defended``)."""
    ramps = [i for i, r in enumerate(board.is_ramp) if r]
    return bool(ramps) and all(world.objects[i] in board.room
                               or (world.locks[i] == HIDERS and world.objects[i] not in board.vault_spots)
                               for i in ramps)


def inside(board: Board, world: World, agents: tuple[int, ...] | None = None) -> bool:
    """The hiders (``agents``, default all) stand in the room (its doors are not in it)."""
    return all(world.agents[a] in board.room for a in (range(len(world.agents)) if agents is None else agents))
