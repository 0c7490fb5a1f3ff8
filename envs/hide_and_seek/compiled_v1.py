"""The compiled core of ``hide_and_seek-v1``, and where v1 cores are built.

:class:`CompiledHideAndSeekV1Core` is :class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`
(the numpy core, kept as the reference) with its hot paths compiled: ``step``,
``action_masks``, ``visibility``, ``observe`` and ``critic_state`` run the numba kernels of
:mod:`envs.hide_and_seek.kernels_v1` over the very same state arrays, and ``reset`` draws
the standard quadrant layouts through :class:`QuadrantDraws` (the same random calls as
:func:`envs.hide_and_seek.layouts_v1.quadrant_layout`, the room's geometry cached) and
loads all rows at once. Everything else (phases, door statistics, shaping,
``set_layout``, ``draw_layout``) is the numpy core's own code on that state. The two are
equal step for step: observations, masks, rewards, dones, the critic's state and every state array
(``tests/envs/test_compiled_hide_and_seek_v1.py``).

:func:`v1_core` is the one place that picks a v1 core on the host: the PettingZoo env,
the trainer and the league build theirs through it (or, for the env, its ``core_type``),
``backend="compiled"`` by default, ``"numpy"`` for the reference. The kernels compile on
first use and are cached on disk next to this package (``cache=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.hide_and_seek import kernels_v1 as kernels
from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.curriculum import drawn_share
from envs.hide_and_seek.layouts import Layout
from envs.hide_and_seek.layouts_v1 import place_ramp_stage, quadrant_room, vault_spots
from envs.hide_and_seek.rules import MOVES, NUM_ACTIONS, UNLOCKED

DEFAULT_BACKEND = "compiled"


@dataclass(frozen=True)
class QuadrantRoom:
    """The fixed part of a quadrant layout: one choice of doors and corner on one grid size.

    Attributes:
        index: Its row in :class:`QuadrantDraws`' stacks.
        walls, room: ``(size, size)`` bool (read-only).
        doors: ``(2, 2)`` int64.
        inside, outside: The flat cells where hiders and boxes, and seekers and ramps, are drawn.
        by_door: ``(k, 2)``: the room cell next to each distinct door where ``box_by_door`` puts a box.
        vault: ``(size, size)`` bool: its :func:`~envs.hide_and_seek.layouts_v1.vault_spots`.
    """

    index: int
    walls: np.ndarray
    room: np.ndarray
    doors: np.ndarray
    inside: np.ndarray
    outside: np.ndarray
    by_door: np.ndarray
    vault: np.ndarray


class _Replay:
    """Hands :func:`envs.hide_and_seek.layouts.open_doors` integers already drawn."""

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)

    def integers(self, high: int) -> int:
        return self.values.pop(0)


class QuadrantDraws:
    """:func:`envs.hide_and_seek.layouts_v1.quadrant_layout` of a seed, fast and equal.

    A seed's generator is used exactly as ``quadrant_layout`` uses it (door count, door
    cells, corner, then the two ``choice`` draws of start cells); only the grid built from
    the door and corner draws is cached, once per choice (built by the layout code itself,
    :func:`envs.hide_and_seek.layouts.open_doors`). ``walls``, ``room`` and ``doors`` stack
    every room seen so far (and ``vault`` their vault spots), indexed by :attr:`QuadrantRoom.index`.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        _, _, self.bottom, self.side = quadrant_room(size)
        self.rooms: dict[tuple, QuadrantRoom] = {}
        self.walls = np.zeros((0, size, size), dtype=bool)
        self.room = np.zeros((0, size, size), dtype=bool)
        self.doors = np.zeros((0, 2, 2), dtype=np.int64)
        self.vault = np.zeros((0, size, size), dtype=bool)

    def _room(self, key: tuple) -> QuadrantRoom:
        one_door, draws = key[0], key[1:]
        walls, room, _, _ = quadrant_room(self.size)
        walls, room, doors = grid.open_doors(_Replay(draws), walls, room, self.bottom, self.side, one_door)
        near = grid.near_doors(walls.shape, doors)
        distinct = doors[:1] if (doors[0] == doors[1]).all() else doors
        by_door = []
        for door in distinct:
            by = door + MOVES
            by = by[((by >= 0) & (by < self.size)).all(-1)]
            by_door.append(by[room[by[:, 0], by[:, 1]]][0])
        parts = [np.ascontiguousarray(walls), np.ascontiguousarray(room), doors.astype(np.int64),
                 np.flatnonzero(room & ~near), np.flatnonzero(~room & ~walls & ~near),
                 np.array(by_door, dtype=np.int64).reshape(-1, 2), vault_spots(walls, room, doors)]
        for part in parts:
            part.flags.writeable = False
        made = QuadrantRoom(len(self.rooms), *parts)
        self.rooms[key] = made
        self.walls = np.concatenate([self.walls, made.walls[None]])
        self.room = np.concatenate([self.room, made.room[None]])
        self.doors = np.concatenate([self.doors, made.doors[None]])
        self.vault = np.concatenate([self.vault, made.vault[None]])
        return made

    def draw(self, seed: int, n_hiders: int, n_seekers: int, n_boxes: int, n_ramps: int,
             n_doors: int | None = None, box_by_door: bool = False, ramp_by_door: bool = False,
             ramp_reach: float = 0.0) -> tuple[QuadrantRoom, np.ndarray]:
        """``quadrant_layout(size, n_hiders, ..., seed, ...)`` as its room and its start cells
        ``(n_hiders + n_boxes + n_seekers + n_ramps, 2)``: hiders, boxes, seekers, ramps."""
        rng = np.random.default_rng(seed)
        one_door = bool(rng.integers(2) == 0 if n_doors is None else n_doors == 1)
        if one_door:
            draws = (int(rng.integers(len(self.bottom) + len(self.side))),)
        else:
            draws = (int(rng.integers(len(self.bottom))), int(rng.integers(len(self.side))))
        key = (one_door, *draws, int(rng.integers(4)))
        room = self.rooms.get(key) or self._room(key)
        ins = rng.choice(room.inside, n_hiders + n_boxes, replace=False)
        outs = rng.choice(room.outside, n_seekers + n_ramps, replace=False)
        flat = np.concatenate([ins, outs])
        cells = np.stack([flat // self.size, flat % self.size], -1).astype(np.int64)
        if box_by_door:
            k = min(len(room.by_door), n_boxes)
            cells[n_hiders : n_hiders + k] = room.by_door[:k]
        if ramp_by_door and n_ramps:
            place_ramp_stage(room.walls, room.room, room.doors, cells, n_hiders + n_boxes, n_seekers, ramp_reach,
                             seed, room.vault)
        return room, cells


class CompiledHideAndSeekV1Core(HideAndSeekV1Core):
    """:class:`HideAndSeekV1Core` with compiled step, masks, sight, observations and resets
    (see the module docstring); same arguments, state, results and errors.

    Layouts loaded by :meth:`set_layout` must have walls all around and agents and objects
    inside that border (what :func:`envs.hide_and_seek.layouts_v1.parse_layout` draws), so
    that no kernel reads past the grid.
    """

    backend = "compiled"

    def __init__(self, n_envs: int = 1, config: HideAndSeekV1Config | None = None) -> None:
        super().__init__(n_envs, config)
        self._ramp_ids = np.flatnonzero(self.is_ramp)
        self._draws = QuadrantDraws(self.size) if self.layout == "quadrant" else None
        self._last_vis = self._ground_vis.copy()

    # ----------------------------------------------------------------- episodes
    def reset(self, seeds, rows=None):
        rows = self._rows if rows is None else np.asarray(rows)
        if len(seeds) != len(rows):
            raise ValueError(f"{len(rows)} envs to reset but {len(seeds)} seeds")
        if self._draws is None or len(np.unique(rows)) != len(rows):
            for row, seed in zip(rows.tolist(), seeds):
                self._load(row, self.draw_layout(int(seed)))
        elif len(rows):
            self._load_quadrants(np.asarray(rows, dtype=np.int64), [self._draw(int(seed)) for seed in seeds])
        self._refresh(rows)
        return self.observe(self._last_vis), self.action_masks()

    def _draw(self, seed: int) -> tuple[QuadrantRoom, np.ndarray]:
        """:meth:`draw_layout` of ``seed`` on the quadrant layout, as its room and start cells."""
        return self._draws.draw(
            seed, self.n_hiders, self.n_seekers, self.n_real_boxes, self.n_ramps, self.n_doors,
            drawn_share(self.box_by_door, seed, 3), drawn_share(self.ramp_by_door, seed, 4), self.ramp_reach)

    def _load_quadrants(self, rows: np.ndarray, draws: list[tuple[QuadrantRoom, np.ndarray]]) -> None:
        """``_load`` of every row at once: row ``rows[i]`` starts ``draws[i]``."""
        ids = np.array([room.index for room, _ in draws])
        cells = np.stack([c for _, c in draws])
        h, b, s, n = self.n_hiders, self.n_real_boxes, self.n_seekers, self.n_boxes
        self.walls[rows] = self._draws.walls[ids]
        self.doors[rows] = self._draws.doors[ids]
        self.room[rows] = self._draws.room[ids]
        self.vault[rows] = self._draws.vault[ids]
        self.agent_pos[rows] = np.concatenate([cells[:, :h], cells[:, h + b : h + b + s]], 1)
        self.box_pos[rows, :n] = np.concatenate([cells[:, h : h + b], cells[:, h + b + s :]], 1)
        self.box_lock[rows, :n] = UNLOCKED
        self.box_holder[rows] = -1
        self.holding[rows] = -1
        kernels.occupancy(rows, self.agent_pos, self.box_pos, n, self.agent_at, self.box_at)
        self.t[rows] = 0
        self.vaulted[rows] = False
        self.seen_steps[rows] = 0
        self.ramp_used[rows] = False

    def _load(self, row: int, layout: Layout) -> None:
        walls = np.asarray(layout.walls, dtype=bool)
        if walls.shape == (self.size, self.size):
            border = np.concatenate([walls[0], walls[-1], walls[:, 0], walls[:, -1]])
            cells = np.concatenate([np.reshape(c, (-1, 2)) for c in (layout.hiders, layout.seekers, layout.boxes,
                                                                     getattr(layout, "ramps", np.zeros((0, 2))))])
            if not border.all() or not ((cells >= 1) & (cells <= self.size - 2)).all():
                raise ValueError("the compiled core needs walls all around and agents and objects inside them")
        super()._load(row, layout)

    # ----------------------------------------------------------------- dynamics
    def step(self, actions: np.ndarray):
        """As :meth:`HideAndSeekV1Core.step`, in one compiled pass over the envs."""
        n, a = self.n_envs, self.n_agents
        actions = np.ascontiguousarray(np.asarray(actions, dtype=np.int64).reshape(n, a))
        obs = np.empty((n, a, self.obs_dim), dtype=np.float32)
        rewards = np.empty((n, a), dtype=np.float32)
        dones = np.empty(n, dtype=bool)
        masks = np.empty((n, a, NUM_ACTIONS), dtype=bool)
        ground, last = np.empty((n, a, a), dtype=bool), np.empty((n, a, a), dtype=bool)
        kernels.step(
            self.walls, self.agent_pos, self.box_pos, self.box_lock, self.box_holder, self.holding, self.agent_at,
            self.box_at, self.t, self.team, self.is_ramp, self.prep_steps, self.max_steps, self.doors, self.room,
            self.vault, self._ramp_ids, self._in_range, self._between, self.view_size, actions,
            self.seen, self._prep_doors, self.vaulted, self.seen_steps, self.ramp_used, self._prep_ramps,
            obs, rewards, dones, masks, ground, last)
        self._ground_vis, self._last_vis = ground, last
        return obs, rewards, dones, masks

    # ------------------------------------------------------------ perception
    def action_masks(self) -> np.ndarray:
        out = np.empty((self.n_envs, self.n_agents, NUM_ACTIONS), dtype=bool)
        kernels.masks(self.walls, self.agent_pos, self.box_pos, self.box_lock, self.box_holder, self.holding,
                      self.agent_at, self.box_at, self.t, self.team, self.is_ramp, self.prep_steps, self.max_steps,
                      out)
        return out

    def visibility(self) -> np.ndarray:
        n, a = self.n_envs, self.n_agents
        ground, last = np.empty((n, a, a), dtype=bool), np.empty((n, a, a), dtype=bool)
        kernels.visibility(self.walls, self.agent_pos, self.box_at, self.is_ramp, self._in_range, self._between,
                           ground, last)
        self._ground_vis, self._last_vis = ground, last
        return last

    def critic_state(self) -> np.ndarray:
        """:meth:`HideAndSeekV1Core.critic_state` in one compiled pass (a tenth of its time; the
        trainer's central critic reads it at every step)."""
        n, a, b, s = self.n_envs, self.n_agents, self.box_pos.shape[1], self.size
        d = 2 * a + a * b + 5 * b + 2 * self.doors.shape[1] + 5 + 2 * s * s + a + 3
        out = np.empty((n, d), dtype=np.float32)
        kernels.critic_state(self.walls, self.agent_pos, self.box_pos, self.box_lock, self.holding, self.box_at,
                             self.t, self.is_ramp, self.prep_steps, self.max_steps, self.doors, self.room, self.vault,
                             self.seen, self.seen_steps, self.ramp_used, out)
        return out

    def observe(self, vis: np.ndarray | None = None) -> np.ndarray:
        vis = self.visibility() if vis is None else np.ascontiguousarray(vis, dtype=bool)
        out = np.empty((self.n_envs, self.n_agents, self.obs_dim), dtype=np.float32)
        kernels.observe(self.walls, self.agent_pos, self.box_lock, self.holding, self.box_at, self.t, self.team,
                        self.is_ramp, self.prep_steps, self.max_steps, self.view_size, vis, out)
        return out


V1_CORES: dict[str, type[HideAndSeekV1Core]] = {"compiled": CompiledHideAndSeekV1Core, "numpy": HideAndSeekV1Core}
BACKENDS = tuple(V1_CORES)
"""v1 cores on the host: ``compiled`` (numba, the default) and ``numpy`` (the reference)"""


def v1_core(n_envs: int = 1, config: HideAndSeekV1Config | None = None,
            backend: str = DEFAULT_BACKEND) -> HideAndSeekV1Core:
    """A host core of ``n_envs`` ``hide_and_seek-v1`` episodes: the compiled one by default,
    ``backend="numpy"`` for the numpy reference (:data:`BACKENDS`)."""
    if backend not in V1_CORES:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return V1_CORES[backend](n_envs, config)


__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "V1_CORES",
    "CompiledHideAndSeekV1Core",
    "QuadrantDraws",
    "QuadrantRoom",
    "v1_core",
]
