"""Scripted baselines for role and team envs: opponents every role's board starts with.

Like :mod:`agents.baselines` they are batched, read only what a learned policy sees
(the observation and the action mask) and take ``epsilon`` (a uniformly random legal
move with that probability). A baseline made for one role (``chaser`` hunts, so it
is a seeker or a predator) declares it in ``role``; the ladder gives it only that
role's seats. One policy drives every seat of its team.

hide_and_seek-v0 (observation: six 9x9 planes around the agent, then flags; see
:mod:`envs.hide_and_seek.env`):
    ``chaser`` (seeker): steps toward the nearest hider in sight, else wanders.
    ``box-hider`` (hider): in preparation, finds a door of the room in view, grabs the
        nearest box from the far side and walks it into the door, then locks it (on
        one-door layouts it blocks the door in about a third of the episodes; without
        a door in view it locks a box where it stands); afterwards it flees seekers.
simple_tag-v3 (observation: own velocity and position, landmarks, the others'
positions relative to the agent):
    ``chaser`` (predator): accelerates toward the prey.
    ``evader`` (prey): accelerates away from the nearest predator, back toward the
        centre near the edge of the arena.
rps-v2 (observation: the opponent's last move, 3 before the first):
    ``rock``, ``paper``, ``scissors``: always the same move.
    ``counter``: the move that beats the opponent's last one.
"""

from __future__ import annotations

import numpy as np

from agents.baselines import ScriptedPolicy
from agents.policy import MatchRng
from envs.hide_and_seek.rules import CHANNELS, GRAB, LOCK, MOVES, NOOP, VIEW_SIZE, flat_index

# hide_and_seek-v0's observation layout and actions, from its rules.
HS_VIEW = VIEW_SIZE
HS_PLANE = HS_VIEW * HS_VIEW
HS_BOXES, HS_OPPONENTS = CHANNELS.index("boxes"), CHANNELS.index("visible_opponents")
HS_PREP, HS_TIME, HS_HOLDING = (flat_index(name) for name in ("prep_phase", "time_fraction", "holding"))
HS_NOOP, HS_GRAB, HS_LOCK = NOOP, GRAB, LOCK
HS_MOVES = MOVES
# simple_tag-v3: actions 1-4 push -x, +x, -y, +y.
TAG_MOVES = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])


def _pick(weights: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
    """One action per row, with probability proportional to ``weights`` among legal ones;
    a uniformly random legal action where no legal action has weight."""
    w = np.where(mask, np.maximum(weights, 0.0), 0.0)
    total = w.sum(axis=1)
    cdf = np.cumsum(w, axis=1)
    u = rng.uniform(1)[:, 0] * np.where(total > 0, total, 1.0)
    chosen = (cdf <= u[:, None]).sum(axis=1).clip(0, w.shape[1] - 1)
    return np.where(total > 0, chosen, rng.choice(mask))


def _toward(direction: np.ndarray, moves: np.ndarray, num_actions: int) -> np.ndarray:
    """Weights ``(n, num_actions)`` for moves 1-4 that go along ``direction`` ``(n, 2)``."""
    weights = np.zeros((direction.shape[0], num_actions))
    weights[:, 1:5] = np.maximum(direction @ moves.T, 0.0)
    return weights


def _nearest_cell(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offset ``(n, 2)`` (rows, cols from the agent) of the nearest set cell of each 9x9
    plane, and whether the plane has one."""
    n = planes.shape[0]
    grid = planes.reshape(n, HS_VIEW, HS_VIEW) > 0
    rows, cols = np.mgrid[:HS_VIEW, :HS_VIEW] - HS_VIEW // 2
    dist = np.where(grid, np.abs(rows) + np.abs(cols), 10**6).reshape(n, -1)
    best = dist.argmin(axis=1)
    offset = np.stack([rows.ravel()[best], cols.ravel()[best]], 1)
    return offset, grid.reshape(n, -1).any(axis=1)


class HideAndSeekChaser(ScriptedPolicy):
    """hide_and_seek-v0 seeker: toward the nearest hider in sight, else a random step."""

    name = "chaser"
    role = "seeker"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        obs = obs.reshape(obs.shape[0], -1)
        plane = obs[:, HS_OPPONENTS * HS_PLANE:(HS_OPPONENTS + 1) * HS_PLANE]
        offset, seen = _nearest_cell(plane)
        weights = _toward(offset.astype(float), HS_MOVES, mask.shape[1])
        wander = np.zeros_like(weights)
        wander[:, 1:5] = 1.0
        return _pick(np.where(seen[:, None], weights, wander), mask, rng)


class HideAndSeekBoxHider(ScriptedPolicy):
    """hide_and_seek-v0 hider: push a box into the room's door and lock it, then flee.

    In preparation: a door is a floor cell in view between two walls. The hider walks
    to the side of the nearest free box away from the door (along the wall's normal),
    grabs it and walks so that the box, which moves with it, lands on the door; there it
    locks it. Without a door in view it fetches a box and locks it where it stands
    late in preparation. Afterwards it flees seekers in sight.
    """

    name = "box-hider"
    role = "hider"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        obs = obs.reshape(obs.shape[0], -1)
        n, actions = mask.shape
        weights = np.zeros((n, actions))
        weights[:, HS_NOOP] = 1.0
        prep, late = obs[:, HS_PREP] > 0, obs[:, HS_TIME] >= 0.3
        for i in np.flatnonzero(prep):
            weights[i] = _prep_move(obs[i], mask[i], bool(late[i]))
        seeker, seen = _nearest_cell(obs[:, HS_OPPONENTS * HS_PLANE:(HS_OPPONENTS + 1) * HS_PLANE])
        flee = ~prep & seen
        weights[flee] = _toward(-seeker[flee].astype(float), HS_MOVES, actions)
        return _pick(weights, mask, rng)


def _plane(obs: np.ndarray, channel: int) -> np.ndarray:
    return obs[channel * HS_PLANE:(channel + 1) * HS_PLANE].reshape(HS_VIEW, HS_VIEW) > 0


def _doors(walls: np.ndarray, boxes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Free door cells in view as ``(offset from the agent, unit normal of the wall)``."""
    out = []
    c = HS_VIEW // 2
    for r in range(1, HS_VIEW - 1):
        for k in range(1, HS_VIEW - 1):
            if walls[r, k] or boxes[r, k]:
                continue
            if walls[r - 1, k] and walls[r + 1, k] and not walls[r, k - 1] and not walls[r, k + 1]:
                out.append((np.array([r - c, k - c]), np.array([0, 1])))
            elif walls[r, k - 1] and walls[r, k + 1] and not walls[r - 1, k] and not walls[r + 1, k]:
                out.append((np.array([r - c, k - c]), np.array([1, 0])))
    return sorted(out, key=lambda d: int(np.abs(d[0]).sum()))


def _step_to(target: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Weights of the legal moves that bring the agent closest to ``target`` (offset)."""
    weights = np.zeros(mask.shape[0])
    dist = np.abs(target[None, :] - HS_MOVES).sum(1)
    legal = mask[1:5]
    if legal.any():
        best = dist[legal].min()
        weights[1:5] = legal & (dist == best) & (best < np.abs(target).sum())
    return weights


def _prep_move(obs: np.ndarray, mask: np.ndarray, late: bool) -> np.ndarray:
    """Action weights of one hider in preparation (see :class:`HideAndSeekBoxHider`)."""
    walls, boxes = _plane(obs, 0), _plane(obs, HS_BOXES)
    locked = _plane(obs, 2) | _plane(obs, 3)
    weights = np.zeros(mask.shape[0])
    c = HS_VIEW // 2
    doors = _doors(walls, boxes)
    holding = obs[HS_HOLDING] > 0
    if holding:
        adjacent = [m for m in HS_MOVES if boxes[c + m[0], c + m[1]]]
        if doors and adjacent:
            door, normal = doors[0]
            held = max(adjacent, key=lambda m: abs(int(m @ normal)))
            if abs(int(held @ normal)) != 1:  # held from the side: let go, grab it again from behind
                weights[HS_GRAB] = 1.0
                return weights
            weights = _step_to(door - held, mask)
        if not weights.any() or late:
            weights[HS_LOCK] = 1.0
        return weights
    free = boxes & ~locked
    for d, _ in doors:  # a box on a door is done
        free[c + d[0], c + d[1]] = False
    cells = np.argwhere(free) - c
    if cells.size == 0:
        return weights + (np.arange(mask.shape[0]) == HS_NOOP)
    box = cells[np.abs(cells).sum(1).argmin()]
    if doors:
        door, normal = doors[0]
        side = int(np.sign((door - box) @ normal)) or 1
        stand = box - side * normal  # behind the box, seen from the door
    else:
        stand = box - np.sign(box) * (np.abs(box) == np.abs(box).max())
    if not stand.any() and mask[HS_GRAB]:
        weights[HS_GRAB] = 1.0
        return weights
    weights = _step_to(stand, mask)
    if not weights.any():
        weights[HS_GRAB] = float(mask[HS_GRAB])
        weights[1:5] = mask[1:5] * 0.25
    return weights


class TagChaser(ScriptedPolicy):
    """simple_tag-v3 predator: accelerate toward the prey (the last relative position)."""

    name = "chaser"
    role = "predator"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        obs = obs.reshape(obs.shape[0], -1)
        prey = obs[:, 12:14]  # vel 2, pos 2, 2 landmarks, 2 other predators, then the prey
        return _pick(_toward(prey, TAG_MOVES, mask.shape[1]) ** 4, mask, rng)


class TagEvader(ScriptedPolicy):
    """simple_tag-v3 prey: away from the nearest predator, back in near the arena's edge."""

    name = "evader"
    role = "prey"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        obs = obs.reshape(obs.shape[0], -1)
        pos = obs[:, 2:4]
        others = obs[:, 8:14].reshape(-1, 3, 2)  # the three predators, relative
        nearest = others[np.arange(len(obs)), np.linalg.norm(others, axis=2).argmin(axis=1)]
        away = -nearest / np.maximum(np.linalg.norm(nearest, axis=1, keepdims=True), 1e-6)
        direction = np.where((np.abs(pos) > 0.8).any(axis=1, keepdims=True), -pos, away)
        return _pick(_toward(direction, TAG_MOVES, mask.shape[1]) ** 4, mask, rng)


class RpsFixed(ScriptedPolicy):
    """rps-v2: always the same move."""

    MOVES = ("rock", "paper", "scissors")

    def __init__(self, move: str, epsilon: float = 0.0) -> None:
        super().__init__(epsilon)
        self.name, self.move = move, self.MOVES.index(move)

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        return np.full(mask.shape[0], self.move, dtype=np.int64)


class RpsCounter(ScriptedPolicy):
    """rps-v2: the move that beats the opponent's last move (random in the first round)."""

    name = "counter"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        last = np.asarray(obs).reshape(mask.shape[0], -1)[:, 0].astype(np.int64)
        return np.where(last < 3, (last + 1) % 3, rng.choice(mask))


def _rps(move: str):
    return lambda epsilon=0.0: RpsFixed(move, epsilon)


ROLE_BASELINES = {
    "hide_and_seek-v0": {"chaser": HideAndSeekChaser, "box-hider": HideAndSeekBoxHider},
    # v1's observation is v0's (same offsets; its boxes channel shows ramps too) with a ramp
    # window and an on-ramp flag appended, so v0's scripts play v1 as they are.
    "hide_and_seek-v1": {"chaser": HideAndSeekChaser, "box-hider": HideAndSeekBoxHider},
    "simple_tag-v3": {"chaser": TagChaser, "evader": TagEvader},
    "rps-v2": {"rock": _rps("rock"), "paper": _rps("paper"), "scissors": _rps("scissors"),
               "counter": RpsCounter},
}
"""``{env: {name: factory(epsilon=...)}}`` of the scripted baselines above."""


def baseline_role(env_id: str, name: str) -> str | None:
    """The one role baseline ``name`` (``chaser:epsilon=0.2``) plays in ``env_id``; ``None``: any."""
    factory = ROLE_BASELINES.get(env_id, {}).get(name.partition(":")[0])
    return getattr(factory, "role", None) if isinstance(factory, type) else None
