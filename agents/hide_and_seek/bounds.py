"""Lower bounds on the steps a hider still needs in ``hide_and_seek-v1``'s preparation.

The planner's searches (:mod:`agents.hide_and_seek.planner`) cut a state when the steps
taken plus such a bound pass the preparation's end, so every bound here may only
under-estimate: distances count walls only (boxes, ramps and other hiders could only
lengthen a way), a box moves at most one cell per step, a lock is an action of its own,
and a vault (from the ramp over a wall or a box) is counted wherever it could land.
A :data:`Bound` takes the world and the step it is reached at.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

from agents.hide_and_seek import model as rules
from agents.hide_and_seek.model import Board, World
from envs.hide_and_seek.rules import HIDERS

Bound = Callable[[World, int], int]
"""a lower bound on the steps still needed from a world reached at a step"""
INF = 10**6


class Distances:
    """Walls-only step counts on one board (objects ignored: lower bounds), cached."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self._from: dict[int, dict[int, int]] = {}
        self._into_room: dict[int, dict[int, int]] = {}

    def _bfs(self, starts, edges) -> dict[int, int]:
        dist = {s: 0 for s in starts}
        todo = deque(starts)
        while todo:
            c = todo.popleft()
            for n in edges(c):
                if n not in dist:
                    dist[n] = dist[c] + 1
                    todo.append(n)
        return dist

    def _walk(self, c: int) -> list[int]:
        return [c + s for s in self.board.moves if not self.board.walls[c + s]]

    def between(self, a: int, b: int) -> int:
        if a not in self._from:
            self._from[a] = self._bfs([a], self._walk)
        return self._from[a].get(b, INF)

    def into_room(self, cell: int, ramp: int) -> int:
        """Steps from ``cell`` to the room, walking or vaulting from the ramp on ``ramp``."""
        if ramp not in self._into_room:
            size = self.board.size
            row, col = divmod(ramp, size)
            lands = {ramp + 2 * s for s, (dy, dx) in zip(self.board.moves, ((-1, 0), (0, 1), (1, 0), (0, -1)))
                     if 0 <= row + 2 * dy < size and 0 <= col + 2 * dx < size and not self.board.walls[ramp + 2 * s]}

            def back(c: int) -> list[int]:  # predecessors: walks are symmetric, vaults start on the ramp
                return self._walk(c) + ([ramp] if c in lands else [])

            self._into_room[ramp] = self._bfs(list(self.board.room), back)
        return self._into_room[ramp].get(cell, INF)

    def to_room(self, cell: int) -> int:
        return min((self.between(cell, r) for r in self.board.room), default=INF)


def fort_bound(board: Board, dist: Distances, agent: int, locked: bool, passes: dict[int, int] | None = None) -> Bound:
    """Steps hider ``agent`` still needs for the fort: reach a box, move boxes into the open
    doors (one cell per step, best matching), one lock per door box not yet locked.

    ``passes``: the last step at which another hider (playing a fixed plan) stands on a
    cell; a door's box gets in only after that hider has last passed the door (and is
    locked a step later), so the fort is done no earlier than that.
    """
    boxes = [i for i, r in enumerate(board.is_ramp) if not r]
    last = [(passes or {}).get(door) for door in board.doors]
    ready = max((t + 1 + int(locked) for t in last if t is not None), default=0)

    def bound(world: World, t: int) -> int:
        held = [rules.object_at(world, d) for d in board.doors]
        open_doors = [d for d, o in zip(board.doors, held) if o < 0 or board.is_ramp[o]]
        locks = sum(o < 0 or board.is_ramp[o] or world.locks[o] != HIDERS for o in held) if locked else 0
        if not open_doors:
            return max(locks, ready - t)
        if len(open_doors) > len(boxes):
            return INF
        moves = min(sum(dist.between(world.objects[b], d) for b, d in zip(pick, open_doors))
                    for pick in itertools.permutations(boxes, len(open_doors)))
        reach = 0 if world.holding[agent] >= 0 else max(
            0, min(dist.between(world.agents[agent], world.objects[b]) for b in boxes) - 1)
        return max(reach + moves + locks, ready - t)

    return bound


def ramp_bound(board: Board, dist: Distances, agent: int, back_inside: bool) -> Bound:
    """Steps hider ``agent`` still needs to defend the ramp: walk next to it, then lock it
    (and, if ``back_inside``, return to the room) or drag it into the room."""
    ramp = board.is_ramp.index(True)

    def bound(world: World, t: int) -> int:
        pos, cell = world.agents[agent], world.objects[ramp]
        if world.locks[ramp] == HIDERS or cell in board.room:
            return dist.into_room(pos, cell) if back_inside else 0
        drag = dist.to_room(cell)
        if world.holding[agent] == ramp:
            return min(1 + (dist.into_room(pos, cell) if back_inside else 0), drag)
        if rules.holder(world, ramp) >= 0:
            return 0
        best = INF
        for s in board.moves:
            c = cell + s
            if not board.walls[c]:
                way = dist.between(pos, c) + 1
                best = min(best, way + (dist.into_room(c, cell) if back_inside else 0), way + drag)
        return best

    return bound


def no_bound(world: World, t: int) -> int:
    """No task: nothing still needed."""
    return 0
