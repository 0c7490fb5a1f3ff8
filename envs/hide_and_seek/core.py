"""Vectorized core of ``hide_and_seek-v0``: many episodes stepped at once with numpy.

Every state array has a leading ``n_envs`` axis. The PettingZoo env
(:mod:`envs.hide_and_seek.env`) wraps a core of size 1, so the single env and a batch of
``n`` behave identically by construction (``tests/envs/test_hide_and_seek.py`` checks it).

Simultaneous moves are resolved agent by agent within a step, in an order that rotates
every step (agent ``(t + k) % n_agents`` acts k-th at step ``t``), so no seat always
moves first. An action that has become impossible by the time its agent moves (the
cell it walks into was just taken) does nothing. Masked-out or out-of-range actions
also do nothing. Sight is tested once per step, after everyone moved.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.layouts import Layout
from envs.hide_and_seek.rules import CHANNELS, FLAT, GRAB, HIDERS, LOCK, MOVES, NOOP, NUM_ACTIONS, SEEKERS, UNLOCKED


def _check_config(config: HideAndSeekConfig) -> None:
    """Raise ``ValueError`` unless v0's rules can play ``config`` (its boxes: every movable object)."""
    size, n_hiders, n_boxes, n_doors = config.size, config.n_hiders, config.n_boxes, config.n_doors
    lo, _ = grid.room_size_range(size)
    if n_doors not in (None, 1, 2):
        raise ValueError(f"n_doors must be None, 1 or 2, got {n_doors!r}")
    if size < 9:
        raise ValueError(f"size must be >= 9, got {size}")
    if n_hiders < 1 or config.n_seekers < 1 or n_boxes < 0:
        raise ValueError("need n_hiders >= 1, n_seekers >= 1 and n_boxes >= 0")
    if n_hiders + (n_boxes + 1) // 2 > lo * lo - 2:
        raise ValueError(f"hiders and half the boxes must fit in a {lo}x{lo} room")
    if config.view_size < 1 or config.view_size % 2 == 0 or config.vision_radius < 1:
        raise ValueError("view_size must be odd and vision_radius >= 1")
    if config.max_steps < 1 or not 0.0 <= config.prep_fraction < 1.0:
        raise ValueError("need max_steps >= 1 and 0 <= prep_fraction < 1")


class HideAndSeekCore:
    """Steps ``n_envs`` hide-and-seek episodes at once.

    Agents ``0 .. n_hiders-1`` are hiders, the rest seekers. Call :meth:`reset` first.

    Args:
        n_envs: Episodes stepped together.
        config: The game's settings (default: ``hide_and_seek-v0``'s); ``box_by_door`` and
            ``seekers_by_door`` become attributes read at every reset.

    Raises:
        ValueError: Settings the rules cannot play (grid too small, a room too small for
            its hiders and boxes, an even view).
        TypeError: The other version's config.
    """

    config_type: ClassVar[type[HideAndSeekConfig]] = HideAndSeekConfig

    def __init__(self, n_envs: int = 1, config: HideAndSeekConfig | None = None) -> None:
        config = self._own_config(config)
        _check_config(config)
        self.config = config
        size, n_hiders, n_seekers, n_boxes = config.size, config.n_hiders, config.n_seekers, config.n_boxes
        view_size = config.view_size
        self.n_envs, self.size, self.n_boxes = n_envs, size, n_boxes
        self.n_hiders, self.n_seekers = n_hiders, n_seekers
        self.n_agents = n_hiders + n_seekers
        self.team = np.array([HIDERS] * n_hiders + [SEEKERS] * n_seekers)
        self.max_steps = config.max_steps
        self.prep_steps = round(config.prep_fraction * config.max_steps)
        self.vision_radius, self.view_size = config.vision_radius, view_size
        self.n_doors, self.box_by_door = config.n_doors, config.box_by_door
        self.seekers_by_door = config.seekers_by_door
        self.obs_dim = len(CHANNELS) * view_size**2 + len(FLAT)
        self._in_range, self._between = grid.sight_table(config.vision_radius)
        n, a, b = n_envs, self.n_agents, max(n_boxes, 1)
        self.walls = np.ones((n, size, size), dtype=bool)
        self.doors = np.zeros((n, 2, 2), dtype=np.int64)
        self.agent_pos = np.zeros((n, a, 2), dtype=np.int64)
        self.box_pos = np.zeros((n, b, 2), dtype=np.int64)
        self.box_lock = np.full((n, b), UNLOCKED, dtype=np.int8)
        self.box_holder = np.full((n, b), -1, dtype=np.int64)  # agent holding the box
        self.holding = np.full((n, a), -1, dtype=np.int64)  # box held by the agent
        self.agent_at = np.full((n, size, size), -1, dtype=np.int64)  # occupancy maps
        self.box_at = np.full((n, size, size), -1, dtype=np.int64)
        self.t = np.zeros(n, dtype=np.int64)
        self.seen = np.zeros(n, dtype=bool)  # a hider was seen at the last step
        self._prep_doors = np.zeros((n, 2), dtype=bool)  # (blocked, blocked and locked)
        self._rows = np.arange(n)

    def _own_config(self, config: HideAndSeekConfig | None) -> HideAndSeekConfig:
        """``config``, or this version's defaults; the other version's config is refused."""
        config = self.config_type() if config is None else config
        if type(config) is not self.config_type:
            raise TypeError(f"{type(self).__name__} takes a {self.config_type.__name__}, "
                            f"got {type(config).__name__}")
        return config

    # ----------------------------------------------------------------- episodes
    def reset(
        self, seeds: list[int] | np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start new episodes with layouts drawn from ``seeds`` (one per row reset).

        Args:
            seeds: Non-negative ints; the same seed always gives the same layout.
            rows: Envs to reset (default: all); the others are left as they are.

        Returns:
            ``obs`` ``(n_envs, n_agents, obs_dim)`` float32 and ``masks``
            ``(n_envs, n_agents, 7)`` bool, for all envs.
        """
        rows = self._rows if rows is None else np.asarray(rows)
        if len(seeds) != len(rows):
            raise ValueError(f"{len(rows)} envs to reset but {len(seeds)} seeds")
        counts = (self.n_hiders, self.n_seekers, self.n_boxes)
        for row, seed in zip(rows.tolist(), seeds):
            layout = grid.random_layout(
                self.size, *counts, int(seed), self.n_doors, self.box_by_door,
                self.seekers_by_door,
            )
            self._load(row, layout)
        self._refresh(rows)
        return self.observe(), self.action_masks()

    def set_layout(self, row: int, layout: Layout) -> None:
        """Start env ``row`` from ``layout`` (e.g. :func:`parse_layout`) at step 0."""
        self._load(row, layout)
        self._refresh(np.array([row]))

    def _load(self, row: int, layout: Layout) -> None:
        got = (layout.walls.shape, len(layout.hiders), len(layout.seekers), len(layout.boxes))
        want = ((self.size, self.size), self.n_hiders, self.n_seekers, self.n_boxes)
        if got != want:
            raise ValueError(
                f"layout (shape, hiders, seekers, boxes) {got}: this core needs {want}"
            )
        self.walls[row] = layout.walls
        self.doors[row] = layout.doors
        self.agent_pos[row] = np.concatenate([layout.hiders, layout.seekers])
        self.box_pos[row, : self.n_boxes] = layout.boxes
        self.box_lock[row, : self.n_boxes] = layout.box_locks
        self.box_holder[row] = -1
        self.holding[row] = -1
        self.agent_at[row] = -1
        ys, xs = self.agent_pos[row].T
        self.agent_at[row, ys, xs] = np.arange(self.n_agents)
        self.box_at[row] = -1
        self.box_at[row, layout.boxes[:, 0], layout.boxes[:, 1]] = np.arange(self.n_boxes)
        self.t[row] = 0

    def _refresh(self, rows: np.ndarray) -> None:
        """Derived state of freshly loaded ``rows``: sight and the door snapshot."""
        self.seen[rows] = self._hiders_seen(self.visibility())[rows]
        self._prep_doors[rows] = self._door_status()[:, rows].T

    def _hiders_seen(self, vis: np.ndarray) -> np.ndarray:
        return vis[:, self.team == SEEKERS][:, :, self.team == HIDERS].any((1, 2))

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every unfinished env by one step.

        Args:
            actions: ``(n_envs, n_agents)`` ints in ``0..6``; illegal ones act as noop.

        Returns:
            ``obs`` ``(n_envs, n_agents, obs_dim)`` float32, ``rewards``
            ``(n_envs, n_agents)`` float32, ``dones`` ``(n_envs,)`` bool and ``masks``
            ``(n_envs, n_agents, 7)`` bool. Finished envs stay as they are (reward 0).
        """
        actions = np.asarray(actions, dtype=np.int64).reshape(self.n_envs, self.n_agents)
        live = self.t < self.max_steps
        valid = (actions >= 0) & (actions < NUM_ACTIONS)
        safe = np.where(valid, actions, NOOP)
        legal = np.take_along_axis(self.action_masks(), safe[..., None], -1)[..., 0]
        acts = np.where(legal & live[:, None], safe, NOOP)
        for k in range(self.n_agents):
            agent = (self.t + k) % self.n_agents
            act = acts[self._rows, agent]
            for chosen, handle in (((act >= 1) & (act <= 4), self._move), (act == GRAB, self._grab),
                                   (act == LOCK, self._lock)):
                if chosen.any():
                    handle(self._rows[chosen], agent[chosen], act[chosen])
        rewarded = live & (self.t >= self.prep_steps)
        self.t += live
        vis = self.visibility()
        self.seen = self._hiders_seen(vis)
        team_reward = np.where(self.seen, -1.0, 1.0) * rewarded
        rewards = np.where(self.team == HIDERS, team_reward[:, None], -team_reward[:, None])
        now = live & (self.t == self.prep_steps)
        self._prep_doors[now] = self._door_status()[:, now].T
        dones = self.t >= self.max_steps
        return self.observe(vis), rewards.astype(np.float32), dones, self.action_masks()

    def door_block_status(self, locked: bool = False) -> np.ndarray:
        """Whether every door of the hiders' room held a box at the end of preparation.

        Before preparation has ended, the current state is reported instead.

        Args:
            locked: Require the door boxes to be locked by the hiders as well.

        Returns:
            ``(n_envs,)`` bool.
        """
        current = self._door_status()
        done_prep = self.t >= self.prep_steps
        return np.where(done_prep, self._prep_doors[:, int(locked)], current[int(locked)])

    def _door_status(self) -> np.ndarray:
        """``(2, n_envs)``: all doors hold a box; all doors hold a box locked by hiders."""
        boxes = self.box_at[self._rows[:, None], self.doors[..., 0], self.doors[..., 1]]
        blocked = (boxes >= 0).all(1)
        locks = self.box_lock[self._rows[:, None], np.maximum(boxes, 0)]
        return np.stack([blocked, blocked & (locks == HIDERS).all(1)])

    def critic_state(self) -> np.ndarray:
        """The full state of every env as features for a centralized critic, ``(n_envs, d)`` float32.

        What no agent's observation holds whole: every agent's position (over ``size - 1``)
        and the box it holds (one-hot), every box's position and lock (one-hot: unlocked,
        hiders, seekers), the doors, whether they hold a box (and locked by the hiders)
        now, the step (over ``max_steps``), the preparation flag, whether a hider is seen,
        and the walls. Computed in float64, then rounded, so the torch core's
        (:meth:`envs.hide_and_seek.device.core.TorchHideAndSeekCore.critic_state`) is equal.
        """
        n, scale = self.n_envs, self.size - 1
        boxes = self.box_pos.shape[1]
        parts = [
            self.agent_pos.reshape(n, -1) / scale,
            (self.holding[..., None] == np.arange(boxes)).reshape(n, -1),
            self.box_pos.reshape(n, -1) / scale,
            (self.box_lock[..., None] == np.array([UNLOCKED, HIDERS, SEEKERS])).reshape(n, -1),
            self.doors.reshape(n, -1) / scale,
            self._door_status().T,
            np.stack([self.t / self.max_steps, self.t < self.prep_steps, self.seen], 1),
            self.walls.reshape(n, -1),
        ]
        return np.concatenate([p.astype(np.float64) for p in parts], 1).astype(np.float32)

    # ----------------------------------------------------------------- dynamics
    def _free(
        self,
        r: np.ndarray,
        cells: np.ndarray,
        agent: np.ndarray,
        box: np.ndarray,
        agents_block: bool = True,
    ) -> np.ndarray:
        """Cells that agent ``agent`` holding ``box`` (-1: none) may enter."""
        y, x = cells[..., 0], cells[..., 1]
        other_box = self.box_at[r, y, x]
        ok = ~self.walls[r, y, x] & ((other_box < 0) | (other_box == box))
        if agents_block:
            other_agent = self.agent_at[r, y, x]
            ok &= (other_agent < 0) | (other_agent == agent)
        return ok

    def _move(self, r: np.ndarray, a: np.ndarray, act: np.ndarray) -> None:
        """Agents ``a`` of rows ``r`` move (``act`` 1-4), with the box each holds: pushed, pulled or dragged
        sideways. The three handlers (``_move``, ``_grab``, ``_lock``) get only the agents acting so."""
        step = MOVES[act - 1]
        pos, box = self.agent_pos[r, a], self.holding[r, a]
        held = box >= 0
        box_pos = np.where(held[:, None], self.box_pos[r, np.maximum(box, 0)], pos)
        new_pos, new_box_pos = pos + step, box_pos + step
        ok = self._free(r, new_pos, a, box) & (~held | self._free(r, new_box_pos, a, box))
        self._relocate(r[ok], a[ok], box[ok], pos[ok], box_pos[ok], new_pos[ok], new_box_pos[ok])

    def _relocate(self, r: np.ndarray, a: np.ndarray, box: np.ndarray, pos: np.ndarray, box_pos: np.ndarray,
                  new_pos: np.ndarray, new_box_pos: np.ndarray) -> None:
        """Agents ``a`` of rows ``r`` go from ``pos`` to ``new_pos``, and the box each holds (``box`` >= 0)
        from ``box_pos`` to ``new_box_pos``."""
        held = box >= 0
        self.agent_at[r, pos[:, 0], pos[:, 1]] = -1
        self.box_at[r[held], box_pos[held, 0], box_pos[held, 1]] = -1
        self.agent_at[r, new_pos[:, 0], new_pos[:, 1]] = a
        self.box_at[r[held], new_box_pos[held, 0], new_box_pos[held, 1]] = box[held]
        self.agent_pos[r, a] = new_pos
        self.box_pos[r[held], box[held]] = new_box_pos[held]

    def _adjacent(self, r: np.ndarray, agent: np.ndarray) -> np.ndarray:
        """Box ids (-1: none) north, east, south and west of each agent: ``(..., 4)``."""
        cells = self.agent_pos[r, agent][..., None, :] + MOVES
        return self.box_at[r[..., None], cells[..., 0], cells[..., 1]]

    def _targets(self, r: np.ndarray, agent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First adjacent box each agent could grab, and could lock or unlock (-1: none)."""
        adj = self._adjacent(r, agent)
        some = np.maximum(adj, 0)
        lock = self.box_lock[r[..., None], some]
        free = (adj >= 0) & (lock == UNLOCKED) & (self.box_holder[r[..., None], some] < 0)
        toggle = free | ((adj >= 0) & (lock == self.team[agent][..., None]))

        def first(ok: np.ndarray) -> np.ndarray:
            return np.where(
                ok.any(-1), np.take_along_axis(adj, ok.argmax(-1)[..., None], -1)[..., 0], -1
            )

        return first(free), first(toggle)

    def _grab(self, r: np.ndarray, a: np.ndarray, act: np.ndarray) -> None:
        """Release the held box, or grab the first free adjacent one."""
        box = self.holding[r, a]
        let_go = box >= 0
        self.box_holder[r[let_go], box[let_go]] = -1
        self.holding[r[let_go], a[let_go]] = -1
        r, a = r[~let_go], a[~let_go]
        box, _ = self._targets(r, a)
        ok = box >= 0
        self.holding[r[ok], a[ok]] = box[ok]
        self.box_holder[r[ok], box[ok]] = a[ok]

    def _lock(self, r: np.ndarray, a: np.ndarray, act: np.ndarray) -> None:
        """Lock the held box (releasing it), else toggle the first adjacent one this team may."""
        held = self.holding[r, a]
        _, adjacent = self._targets(r, a)
        box = np.where(held >= 0, held, adjacent)
        ok = box >= 0
        r, a, box, held = r[ok], a[ok], box[ok], held[ok]
        self.box_holder[r[held >= 0], held[held >= 0]] = -1
        self.holding[r, a] = -1
        unlocked = self.box_lock[r, box] == UNLOCKED
        self.box_lock[r, box] = np.where(unlocked, self.team[a], UNLOCKED)

    # ------------------------------------------------------------ perception
    def action_masks(self) -> np.ndarray:
        """``(n_envs, n_agents, 7)`` bool: actions that would succeed now.

        Noop is always legal. Moves: not frozen (a seeker in preparation) and the agent's
        target cell (and its held box's) is not a wall or another box; other agents are
        ignored here, as they may move away. Grab: holding a box (release) or a free box
        adjacent. Lock: holding a box, or an adjacent box this team may lock or unlock.
        Finished envs allow only noop.
        """
        r = self._rows[:, None]
        agents = np.arange(self.n_agents)[None, :].repeat(self.n_envs, 0)
        pos, box = self.agent_pos, self.holding
        held = box >= 0
        box_pos = np.where(held[..., None], self.box_pos[r, np.maximum(box, 0)], pos)
        new_pos, new_box_pos = pos[:, :, None] + MOVES, box_pos[:, :, None] + MOVES
        rr, bb = r[..., None], box[..., None]
        moves = self._free(rr, new_pos, -1, bb, False) & (
            ~held[..., None] | self._free(rr, new_box_pos, -1, bb, False)
        )
        grab, lock = self._targets(np.broadcast_to(r, agents.shape), agents)
        masks = np.zeros((self.n_envs, self.n_agents, NUM_ACTIONS), dtype=bool)
        masks[..., NOOP] = True
        masks[..., 1:5] = moves
        masks[..., GRAB] = held | (grab >= 0)
        masks[..., LOCK] = held | (lock >= 0)
        frozen = (self.team == SEEKERS)[None] & (self.t < self.prep_steps)[:, None]
        masks[..., 1:] &= ~(frozen | (self.t >= self.max_steps)[:, None])[..., None]
        return masks

    def visibility(self) -> np.ndarray:
        """``vis[e, i, j]``: agent ``i`` sees agent ``j`` (within radius, no wall or box between)."""
        blocks = self.walls | (self.box_at >= 0)
        return grid.line_of_sight(self.agent_pos, blocks, self._in_range, self._between)

    def observe(self, vis: np.ndarray | None = None) -> np.ndarray:
        """Egocentric observations ``(n_envs, n_agents, obs_dim)`` float32.

        ``len(CHANNELS)`` window planes of ``view_size**2`` cells centred on the agent
        (cells beyond the grid read as walls), flattened channel by channel, then the
        ``FLAT`` features. Only opponents in line of sight appear.
        """
        vis = self.visibility() if vis is None else vis
        n, agents, v = self.n_envs, self.n_agents, self.view_size
        half = v // 2
        lock = self.box_lock[self._rows[:, None, None], np.maximum(self.box_at, 0)]
        has_box = self.box_at >= 0
        maps = np.stack(
            [self.walls, has_box, has_box & (lock == HIDERS), has_box & (lock == SEEKERS)], 1
        )
        # Own-team locks first: seekers read the two lock maps swapped.
        order = np.where((self.team == SEEKERS)[:, None], [0, 1, 3, 2], [0, 1, 2, 3])
        planes = np.zeros((n, agents, len(CHANNELS), v, v), dtype=np.float32)
        planes[:, :, :4] = grid.windows(maps, self.agent_pos, order, v)
        rel = self.agent_pos[:, None, :, :] - self.agent_pos[:, :, None, :] + half
        inside = ((rel >= 0) & (rel < v)).all(-1)
        same = self.team[:, None] == self.team[None, :]
        for channel, ok in enumerate((same & ~np.eye(agents, dtype=bool), ~same & vis)):
            e, i, j = np.nonzero(inside & ok)
            planes[e, i, 4 + channel, rel[e, i, j, 0], rel[e, i, j, 1]] = 1.0
        flat = np.zeros((n, agents, len(FLAT)), dtype=np.float32)
        flat[..., 0] = (self.t < self.prep_steps)[:, None]
        flat[..., 1] = (self.t / self.max_steps)[:, None]
        flat[..., 2], flat[..., 3] = self.team == HIDERS, self.team == SEEKERS
        flat[..., 4] = self.holding >= 0
        flat[..., 5:] = self.agent_pos / (self.size - 1)
        return np.concatenate([planes.reshape(n, agents, -1), flat], -1)
