"""Scripted baselines for role and team envs: opponents every role's board starts with.

Like :mod:`agents.baselines` they are batched, read only what a learned policy sees
(the observation and the action mask) and take ``epsilon`` (a uniformly random legal
move with that probability). A baseline made for one role (``chaser`` hunts, so it
is a seeker or a predator) declares it in ``role``; the ladder gives it only that
role's seats. One policy drives every seat of its team.

hide_and_seek-v0 (observation: six 9x9 planes around the agent, then flags; see
:mod:`envs.hide_and_seek`):
    ``chaser`` (seeker): steps toward the nearest hider in sight, else wanders.
    ``box-hider`` (hider): fetches the nearest box during preparation, grabs it and
        locks it where it stands before the seekers are released (a wall between them
        and the room when the box sits in the doorway), then flees seekers in sight.
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

# hide_and_seek-v0 observation layout (envs.hide_and_seek_core.CHANNELS / FLAT).
HS_VIEW = 9
HS_PLANE = HS_VIEW * HS_VIEW
HS_BOXES, HS_OPPONENTS = 1, 5
HS_PREP, HS_TIME, HS_HOLDING = 6 * HS_PLANE, 6 * HS_PLANE + 1, 6 * HS_PLANE + 4
HS_NOOP, HS_GRAB, HS_LOCK = 0, 5, 6
# Grid moves of actions 1-4 as (row, col) steps: north, east, south, west.
HS_MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
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
    """hide_and_seek-v0 hider: fetch, grab and lock a box in preparation; then flee."""

    name = "box-hider"
    role = "hider"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        obs = obs.reshape(obs.shape[0], -1)
        prep, holding = obs[:, HS_PREP] > 0, obs[:, HS_HOLDING] > 0
        late = obs[:, HS_TIME] >= 0.3  # the last steps of preparation (40% of the match)
        box, has_box = _nearest_cell(obs[:, HS_BOXES * HS_PLANE:(HS_BOXES + 1) * HS_PLANE])
        seeker, seen = _nearest_cell(obs[:, HS_OPPONENTS * HS_PLANE:(HS_OPPONENTS + 1) * HS_PLANE])
        n, actions = mask.shape
        weights = np.zeros((n, actions))
        weights[:, HS_NOOP] = 1.0
        fetch = prep & ~holding & has_box
        weights[fetch] = _toward(box[fetch].astype(float), HS_MOVES, actions)
        weights[fetch & mask[:, HS_GRAB], HS_GRAB] = 100.0
        weights[prep & holding & late, HS_LOCK] = 100.0
        flee = ~prep & seen
        weights[flee] = _toward(-seeker[flee].astype(float), HS_MOVES, actions)
        return _pick(weights, mask, rng)


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
    "simple_tag-v3": {"chaser": TagChaser, "evader": TagEvader},
    "rps-v2": {"rock": _rps("rock"), "paper": _rps("paper"), "scissors": _rps("scissors"),
               "counter": RpsCounter},
}
"""``{env: {name: factory(epsilon=...)}}`` of the scripted baselines above."""


def baseline_role(env_id: str, name: str) -> str | None:
    """The one role baseline ``name`` (``chaser:epsilon=0.2``) plays in ``env_id``; ``None``: any."""
    factory = ROLE_BASELINES.get(env_id, {}).get(name.partition(":")[0])
    return getattr(factory, "role", None) if isinstance(factory, type) else None
