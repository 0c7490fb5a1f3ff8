"""Scripted hider teams that plan ``hide_and_seek-v1``'s preparation: one builds, one defends the ramp.

A perfect hider team splits the work: one hider builds the fort (a box in every door of
the room), the other defends the ramp (locks it off the vault spots, or brings it into the
room). This module plans that with exact searches over the env's rules
(:mod:`agents.hide_and_seek.model`, a planning copy of the core's rules that the tests
step beside the core); :mod:`agents.hide_and_seek.feasibility` plays the plans in the
real core, whose own detectors decide.

**Search** (:func:`search`): A* over the worlds one hider can reach step by step (its
cell, what it holds, where the boxes and the ramp are and who locked them), the other
hider standing still or playing a fixed plan, with the core's turn order, up to the
last step of preparation. Every move of the rules is searched (walking, pushing,
grabbing, dragging, pulling, locking, climbing and vaulting); states are cut only by
admissible lower bounds on the steps still needed (walls-only distances: the best
box-to-door matching the fort still needs, the way to the ramp and, when asked, back
into the room, vaults included), so a hider's plan is optimal given the other's.

**Team** (:meth:`TeamPlanner.plan`): one hider (the lead) plays its optimal plan for its
task as it would alone, started ``d`` steps late (``d`` = 0 .. its slack); the other
searches its own task around it without getting in its way. The fort hider leads first,
then the ramp hider (for the sealed level also a ramp plan that ends away from the
doors, so that the last door can be closed behind it). Both splits of the team are
tried.

**Levels**: ``sealed=False`` asks exactly what the phase detectors count (``fort``:
every door holds a box; ``ramp_defense``: the ramp out of the seekers' use, inside the
room or locked by the hiders off the vault spots, since a ramp locked by the room's wall is
climbed and vaulted all the same). ``sealed=True`` asks what the game pays for: the door
boxes locked as well and both hiders inside the room (a hider left outside is seen by
the seekers; an unlocked door box is pushed in).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from agents.hide_and_seek import model as rules
from agents.hide_and_seek.bounds import INF, Bound, Distances, fort_bound, no_bound, ramp_bound
from agents.hide_and_seek.model import Board, World
from envs.hide_and_seek.rules import ACTIONS, NOOP

Goal = Callable[[World], bool]
MOVES_ONLY = (NOOP, 1, 2, 3, 4)
"""the actions of a hider without a task of its own: it only has to keep out of the way"""


def nominal(board: Board, start: World, hider: int, plan: list[int], horizon: int) -> tuple[list, tuple[int, ...]]:
    """How ``plan`` goes for ``hider`` alone on the board: per step its cell, what it holds and the
    cells and locks of the objects it touches, and which objects those are."""
    world = alone(start, hider)
    worlds = [world]
    for t in range(horizon):
        world = rules.step(board, world, (plan[t] if t < len(plan) else NOOP,), t)
        worlds.append(world)
    first = worlds[0]
    touched = tuple(o for o in range(len(first.objects)) if any(
        w.objects[o] != first.objects[o] or w.locks[o] != first.locks[o] or w.holding[0] == o for w in worlds))
    return [(w.agents[0], w.holding[0], tuple((w.objects[o], w.locks[o]) for o in touched)) for w in worlds], touched


def search(board: Board, start: World, agent: int, goal: Goal, bound: Bound, horizon: int,
           fixed: dict[int, list[int]] | None = None, max_states: int = 100_000,
           actions: tuple[int, ...] = ACTIONS, stats: dict | None = None) -> list[int] | None:
    """The shortest action list of hider ``agent`` after which ``goal`` holds at step ``horizon``.

    The other hiders play ``fixed`` (their action lists; noop after their end, and for
    hiders not in it) as they would alone: ``agent`` must not get in their way (a step
    after which a fixed hider's cell, hold, or an object it moves differs from its plan
    alone is cut). ``bound`` must never overestimate the steps ``agent`` still needs.

    Returns:
        The plan, or ``None`` when there is none (or the search gave up after
        ``max_states`` states: then ``stats["capped"]`` is incremented).
    """
    fixed = fixed or {}
    n = len(start.agents)
    end = max((len(p) for p in fixed.values()), default=0)
    follow = {a: nominal(board, start, a, p, horizon) for a, p in fixed.items()}

    def others(t: int) -> list[int]:
        return [fixed[a][t] if a in fixed and t < len(fixed[a]) else NOOP for a in range(n)]

    def on_plan(world: World, t: int) -> bool:
        for a, (snaps, touched) in follow.items():
            cell, hold, objs = snaps[t]
            if world.agents[a] != cell or world.holding[a] != hold or any(
                    (world.objects[o], world.locks[o]) != v for o, v in zip(touched, objs)):
                return False
        return True

    def holds_to_horizon(world: World, t: int) -> bool:
        """The goal holds at the horizon if ``agent`` stops here and the others play on."""
        for u in range(t, min(end, horizon)):
            world = rules.step(board, world, tuple(others(u)), u)
        return goal(world)

    key0 = (0, start) if end else start
    best = {key0: 0}
    parent: dict = {key0: None}
    queue = [(bound(start, 0), 0, 0, key0, start)]
    tie = itertools.count(1)
    while queue:
        if len(best) >= max_states:
            if stats is not None:
                stats["capped"] = stats.get("capped", 0) + 1
            return None
        _, t, _, key, world = heapq.heappop(queue)
        t = -t
        if best.get(key, INF) < t:
            continue
        if bound(world, t) == 0 and holds_to_horizon(world, t):
            return _unwind(parent, key)
        if t >= horizon:
            continue
        base = others(t)
        seen = set()
        for action in actions:
            if action != NOOP and not rules.legal(board, world, agent, action):
                continue
            acts = base.copy()
            acts[agent] = action
            nxt = rules.step(board, world, tuple(acts), t)
            if nxt in seen or not on_plan(nxt, t + 1):
                continue
            seen.add(nxt)
            h = bound(nxt, t + 1)
            if t + 1 + h > horizon:
                continue
            k = (t + 1, nxt) if t + 1 < end else nxt
            if best.get(k, INF) <= t + 1:
                continue
            best[k], parent[k] = t + 1, (key, action)
            heapq.heappush(queue, (t + 1 + h, -(t + 1), next(tie), k, nxt))
    return None


def _unwind(parent: dict, key) -> list[int]:
    actions = []
    while parent[key] is not None:
        key, action = parent[key]
        actions.append(action)
    return actions[::-1]


def alone(world: World, agent: int) -> World:
    """The world with hider ``agent`` only (it becomes hider 0)."""
    hold = world.holding[agent]
    return World((world.agents[agent],), world.objects, world.locks, (hold,))


def goals(board: Board, sealed: bool, fort_hider: int | None, ramp_hider: int | None, park: bool = False) -> Goal:
    """The goal of a team that builds the fort (if ``fort_hider``) and defends the ramp (if
    ``ramp_hider``: the ramp out of the seekers' use, :func:`rules.ramps_defended`); ``sealed``:
    the door boxes locked and every hider inside the room;
    ``park``: the ramp hider also off the room cells next to the doors (where a door's box
    has to pass)."""
    by_door = {d + s for d in board.doors for s in board.moves} & board.room

    def goal(world: World) -> bool:
        if fort_hider is not None and not rules.fort(board, world, locked=sealed):
            return False
        if ramp_hider is not None and not rules.ramps_defended(board, world):
            return False
        if park and world.agents[ramp_hider] in by_door:
            return False
        return not sealed or rules.inside(board, world)

    return goal



class TeamPlanner:
    """Plans one layout's preparation for a hider team (see the module docstring).

    Args:
        board, world: The layout (:func:`agents.hide_and_seek.model.from_layout`).
        horizon: Preparation steps.
        max_states: Per search; a search that reaches it gives up (counted in ``stats["capped"]``).
    """

    def __init__(self, board: Board, world: World, horizon: int, max_states: int = 20_000) -> None:
        self.board, self.world, self.horizon, self.max_states = board, world, horizon, max_states
        self.dist = Distances(board)
        self.stats: dict[str, int] = {}
        self._alone: dict = {}

    def _search(self, world: World, agent: int, goal: Goal, bound: Bound, fixed=None,
                actions: tuple[int, ...] = ACTIONS) -> list[int] | None:
        return search(self.board, world, agent, goal, bound, self.horizon, fixed, self.max_states, actions,
                      self.stats)

    def _bound(self, task: str, hider: int, sealed: bool, passes: dict[int, int] | None = None) -> Bound:
        if task == "fort":
            return fort_bound(self.board, self.dist, hider, sealed, passes)
        return ramp_bound(self.board, self.dist, hider, sealed)

    def alone_plan(self, hider: int, task: str, sealed: bool, park: bool = False) -> list[int] | None:
        """Hider ``hider``'s optimal plan for ``task`` (``"fort"`` or ``"ramp"``), the other hider
        taken off the board; ``sealed``: locked door boxes / back inside the room; ``park``:
        the ramp hider ends off the cells next to the doors (see :func:`goals`)."""
        key = (hider, task, sealed, park)
        if key not in self._alone:
            goal = goals(self.board, sealed, 0 if task == "fort" else None, 0 if task == "ramp" else None, park)
            self._alone[key] = self._search(alone(self.world, hider), 0, goal, self._bound(task, 0, sealed))
        return self._alone[key]

    def _follow(self, lead: int, fixed: list[int], lead_task: str, task: str | None,
                sealed: bool) -> tuple[list[int], ...] | None:
        """The other hider's plan for ``task`` (or for keeping out of the way) around ``fixed``."""
        follower = 1 - lead
        roles = {lead_task: lead, **({task: follower} if task else {})}
        goal = goals(self.board, sealed, roles.get("fort"), roles.get("ramp"))
        snaps, _ = nominal(self.board, self.world, lead, fixed, self.horizon)
        passes = {cell: t for t, (cell, _, _) in enumerate(snaps)}
        bound = self._bound(task, follower, sealed, passes) if task else no_bound
        other = self._search(self.world, follower, goal, bound, {lead: fixed}, ACTIONS if task else MOVES_ONLY)
        if other is None:
            return None
        return (fixed, other) if lead == 0 else (other, fixed)

    def _leads(self, tasks: list[str], sealed: bool):
        """``(task, hider, plan)`` of every lead to try, in order."""
        for task in tasks:
            for lead in range(len(self.world.agents)):
                other = next((t for t in tasks if t != task), None)
                if other is not None and self.alone_plan(1 - lead, other, sealed) is None:
                    continue
                parks = (True, False) if task == "ramp" and sealed and other else (False,)
                for park in parks:
                    plan = self.alone_plan(lead, task, sealed, park)
                    if plan is not None:
                        yield task, lead, plan

    def plan(self, sealed: bool, fort: bool = True, ramp: bool = True) -> tuple[list[int], ...] | None:
        """Both hiders' action lists for the tasks asked (``None``: none found).

        One hider (the lead) plays its plan alone, started ``d`` steps late; the other
        searches its own task (or, without one, just keeps out of the way) around it.
        """
        tasks = [t for t, want in (("fort", fort), ("ramp", ramp)) if want]
        leads = list(self._leads(tasks, sealed))
        late = sealed and len(tasks) == 2  # the ramp hider must get out and back in before the doors close
        # The fort hider leading is cheap to try (the ramp hider's search is small), so first
        # at every delay; then the ramp hider leading, every lead's first delays first.
        tries = sorted((task != tasks[0], rank, i) for i, (task, _, plan) in enumerate(leads)
                       for rank in range(self.horizon - len(plan) + 1))
        for _, rank, i in tries:
            lead_task, lead, plan = leads[i]
            d = self.horizon - len(plan) - rank if late else rank
            found = self._follow(lead, [NOOP] * d + plan, lead_task, next((t for t in tasks if t != lead_task), None),
                                 sealed)
            if found is not None:
                return found
        return None
