"""Vectorized core of ``hide_and_seek-v1``: v0's rules plus ramps, and per-episode phase detectors.

:class:`HideAndSeekV1Core` extends :class:`envs.hide_and_seek.core.HideAndSeekCore`.
Ramps are stored as extra movable objects after the boxes (object ids
``n_boxes .. n_boxes + n_ramps - 1`` of the ``box_*`` arrays), so grabbing, dragging,
locking and unlocking them follow v0's box rules. What differs (the rules are stated
for users in :mod:`envs.hide_and_seek.env_v1`):

* an agent holding nothing may step onto a ramp nobody holds (it then stands on it);
  a ramp with an agent on it cannot be grabbed or pushed;
* from a ramp, a move into a wall or a box *vaults* it: the agent lands on the cell
  beyond, if that cell is in the grid, floor and empty;
* ramps are low: they do not block sight; an agent on a ramp sees, and is seen, over
  the walls and boxes right next to it (its 8 neighbours);
* an agent holding nothing that moves into an unlocked box nobody holds pushes it one
  cell on, if that cell is free (v0 moves boxes only by grabbing them);
* boxes cannot be climbed (no box surfing) and never enter a ramp's cell.

Phase detectors (:data:`PHASES`, :meth:`HideAndSeekV1Core.phases`), per episode:
``chasing`` share of post-preparation steps in which a seeker saw a hider; ``fort``
every door held a box (not a ramp) when preparation ended; ``ramp_use`` a seeker
vaulted by ramp, or saw a hider from a ramp that it could not have seen from the
ground; ``ramp_defense`` when preparation ended every ramp was inside the room, or locked
by the hiders on a cell from which no vault lands in the room (off the layout's
:func:`~envs.hide_and_seek.layouts_v1.vault_spots`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek import layouts_v1 as grid1
from envs.hide_and_seek.config import HideAndSeekV1Config
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.curriculum import drawn_share
from envs.hide_and_seek.rules import (
    CHANNELS_V1,
    FLAT_V1,
    HIDERS,
    MOVES,
    SEEKERS,
    UNLOCKED,
)


class HideAndSeekV1Core(HideAndSeekCore):
    """Steps ``n_envs`` ``hide_and_seek-v1`` episodes at once.

    Args:
        n_envs: Episodes stepped together.
        config: The game's settings (default: ``hide_and_seek-v1``'s). The curriculum's
            ``box_by_door``, ``ramp_by_door`` and ``ramp_reach`` become attributes read at
            every reset, so a trainer may change them between updates.

    Raises:
        ValueError: Settings the rules cannot play (as :class:`HideAndSeekCore`; an unknown
            layout, hiders and boxes that do not fit in the quadrant room, v0's
            ``seekers_by_door``).
        TypeError: The other version's config.
    """

    config_type = HideAndSeekV1Config

    def __init__(self, n_envs: int = 1, config: HideAndSeekV1Config | None = None) -> None:
        config = self._own_config(config)
        size, n_hiders, n_boxes, n_ramps, layout = (config.size, config.n_hiders, config.n_boxes,
                                                    config.n_ramps, config.layout)
        if layout not in grid1.LAYOUTS:
            raise ValueError(f"layout must be one of {grid1.LAYOUTS}, got {layout!r}")
        if n_ramps < 0:
            raise ValueError(f"n_ramps must be >= 0, got {n_ramps}")
        if layout == "quadrant" and n_hiders + n_boxes > (size // 2 - 1) ** 2 - 2:
            raise ValueError("hiders and boxes must fit in the quadrant room")
        if config.seekers_by_door:
            raise ValueError("seekers_by_door is v0's curriculum; v1's are box_by_door and ramp_by_door")
        # Ramps are boxes to v0's rules: the base core holds boxes and ramps as its objects.
        super().__init__(n_envs, replace(config, n_boxes=n_boxes + n_ramps))
        self.config = config
        self.n_real_boxes, self.n_ramps, self.layout = n_boxes, n_ramps, layout
        self.ramp_by_door, self.ramp_reach = config.ramp_by_door, config.ramp_reach
        self.is_ramp = np.arange(max(self.n_boxes, 1)) >= n_boxes
        self.is_ramp_ext = np.append(self.is_ramp, False)  # index -1 (no object): not a ramp
        self.obs_dim += len(CHANNELS_V1) * config.view_size**2 + len(FLAT_V1)
        n = n_envs
        self.room = np.zeros((n, size, size), dtype=bool)
        self.vault = np.zeros((n, size, size), dtype=bool)  # vault_spots of each env's layout
        self.vaulted = np.zeros((n, self.n_agents), dtype=bool)  # vaulted at the last step
        self._ground_vis = np.zeros((n, self.n_agents, self.n_agents), dtype=bool)
        self._last_vis = self._ground_vis
        self.seen_steps = np.zeros(n, dtype=np.int64)
        self.ramp_used = np.zeros(n, dtype=bool)
        self._prep_ramps = np.zeros(n, dtype=bool)

    # ----------------------------------------------------------------- episodes
    def draw_layout(self, seed: int) -> grid1.LayoutV1:
        """The layout of ``seed`` under this core's settings."""
        draw = grid1.quadrant_layout if self.layout == "quadrant" else grid1.random_room_layout
        by_door = drawn_share(self.box_by_door, seed, 3)
        if self.layout != "quadrant":
            return draw(self.size, self.n_hiders, self.n_seekers, self.n_real_boxes, self.n_ramps,
                        int(seed), self.n_doors, by_door)
        return draw(self.size, self.n_hiders, self.n_seekers, self.n_real_boxes, self.n_ramps,
                    int(seed), self.n_doors, by_door, drawn_share(self.ramp_by_door, seed, 4), self.ramp_reach)

    def reset(self, seeds, rows=None):
        rows = self._rows if rows is None else np.asarray(rows)
        if len(seeds) != len(rows):
            raise ValueError(f"{len(rows)} envs to reset but {len(seeds)} seeds")
        for row, seed in zip(rows.tolist(), seeds):
            self._load(row, self.draw_layout(int(seed)))
        self._refresh(rows)
        return self.observe(), self.action_masks()

    def _load(self, row: int, layout: grid1.LayoutV1) -> None:
        if len(layout.boxes) != self.n_real_boxes or len(layout.ramps) != self.n_ramps:
            raise ValueError(f"layout has {len(layout.boxes)} boxes and {len(layout.ramps)} ramps: "
                             f"this core needs {self.n_real_boxes} and {self.n_ramps}")
        merged = grid.Layout(
            walls=layout.walls, doors=layout.doors, hiders=layout.hiders, seekers=layout.seekers,
            boxes=np.concatenate([layout.boxes.reshape(-1, 2), layout.ramps.reshape(-1, 2)]),
            box_locks=np.concatenate([layout.box_locks, layout.ramp_locks]).astype(np.int8),
        )
        super()._load(row, merged)
        self.room[row] = layout.room
        self.vault[row] = grid1.vault_spots(layout.walls, layout.room, layout.doors)
        self.vaulted[row] = False
        self.seen_steps[row] = 0
        self.ramp_used[row] = False

    def _refresh(self, rows: np.ndarray) -> None:
        super()._refresh(rows)
        self._prep_ramps[rows] = self.ramps_defended()[rows]

    def step(self, actions: np.ndarray):
        """As :meth:`HideAndSeekCore.step`, then the phase detectors advance."""
        live = self.t < self.max_steps
        rewarded = live & (self.t >= self.prep_steps)
        self.vaulted[:] = False
        obs, rewards, dones, masks = super().step(actions)
        self.seen_steps += self.seen & rewarded
        seekers, hiders = self.team == SEEKERS, self.team == HIDERS
        up = self.elevated()[:, seekers]
        extra = (self._last_vis & ~self._ground_vis)[:, seekers][:, :, hiders].any(-1)
        self.ramp_used |= live & ((self.vaulted[:, seekers] | (up & extra)).any(-1))
        now = live & (self.t == self.prep_steps)
        self._prep_ramps[now] = self.ramps_defended()[now]
        return obs, rewards, dones, masks

    def _door_status(self) -> np.ndarray:
        """``(2, n_envs)``: all doors hold a box (ramps do not count); ... locked by hiders."""
        objs = self.box_at[self._rows[:, None], self.doors[..., 0], self.doors[..., 1]]
        blocked = ((objs >= 0) & ~self.is_ramp_ext[objs]).all(1)
        locks = self.box_lock[self._rows[:, None], np.maximum(objs, 0)]
        return np.stack([blocked, blocked & (locks == HIDERS).all(1)])

    def ramps_defended(self) -> np.ndarray:
        """``(n_envs,)``: every ramp is inside the room, or locked by the hiders off the
        :attr:`vault` spots (a ramp locked there is climbed and vaulted into the room all the
        same)."""
        ramps = np.flatnonzero(self.is_ramp)
        if len(ramps) == 0:
            return np.zeros(self.n_envs, dtype=bool)
        pos = self.box_pos[:, ramps]
        at = (self._rows[:, None], pos[..., 0], pos[..., 1])
        return (self.room[at] | ((self.box_lock[:, ramps] == HIDERS) & ~self.vault[at])).all(1)

    def phases(self) -> dict[str, np.ndarray]:
        """Phase detectors of the current episodes (:data:`PHASES`), each ``(n_envs,)`` float.

        ``chasing`` counts the post-preparation steps played so far over all of them;
        ``fort`` and ``ramp_defense`` read the end of preparation once it has passed
        (the current state before).
        """
        post = max(self.max_steps - self.prep_steps, 1)
        done_prep = self.t >= self.prep_steps
        return {
            "chasing": self.seen_steps / post,
            "fort": self.door_block_status(locked=False).astype(np.float64),
            "ramp_use": self.ramp_used.astype(np.float64),
            "ramp_defense": np.where(done_prep, self._prep_ramps, self.ramps_defended()).astype(np.float64),
        }

    def critic_state(self) -> np.ndarray:
        """v0's :meth:`HideAndSeekCore.critic_state` (ramps among the boxes) plus who stands on a
        ramp, whether every ramp is defended now, the detectors so far (seen share, ramp
        used) and the hiders' room."""
        n = self.n_envs
        extra = [
            self.elevated(),
            np.stack([self.ramps_defended(), self.seen_steps / max(self.max_steps - self.prep_steps, 1),
                      self.ramp_used], 1),
            self.room.reshape(n, -1),
        ]
        return np.concatenate([super().critic_state(), *(p.astype(np.float64).astype(np.float32) for p in extra)], 1)

    def door_fraction(self) -> np.ndarray:
        """``(n_envs,)`` share of the room's distinct doors that hold a box now (shaping)."""
        return self._per_door(lambda dist: (dist == 0).astype(np.float64))

    def fort_potential(self) -> np.ndarray:
        """``(n_envs,)`` in ``[0, 1]``: how close the boxes are to closing the doors (shaping).

        Per distinct door 1 when a box is in it, else ``0.5 * (1 - d / size)`` with ``d``
        the L1 distance of the nearest box; averaged over the doors.
        """
        return self._per_door(lambda dist: np.where(dist == 0, 1.0, 0.5 * (1.0 - dist / self.size)))

    def _per_door(self, value) -> np.ndarray:
        """``value(d)`` of each door's nearest-box distance ``d`` ``(n, 2)``, averaged over distinct doors."""
        boxes = self.box_pos[:, ~self.is_ramp]
        if boxes.shape[1] == 0:
            return np.zeros(self.n_envs)
        v = value(np.abs(self.doors[:, :, None, :] - boxes[:, None, :, :]).sum(-1).min(-1))
        same = (self.doors[:, 0] == self.doors[:, 1]).all(-1)
        return np.where(same, v[:, 0], v.mean(1))

    # ----------------------------------------------------------------- dynamics
    def elevated(self) -> np.ndarray:
        """``(n_envs, n_agents)`` bool: the agent stands on a ramp."""
        obj = self.box_at[self._rows[:, None], self.agent_pos[..., 0], self.agent_pos[..., 1]]
        return self.is_ramp_ext[obj]

    def _walkable(self, r: np.ndarray, cells: np.ndarray, agent, box, agents_block: bool = True):
        """Cells the agent may walk into: v0's rule, plus a ramp nobody holds if it holds nothing."""
        y, x = cells[..., 0], cells[..., 1]
        obj = self.box_at[r, y, x]
        ramp_ok = self.is_ramp_ext[obj] & (self.box_holder[r, np.maximum(obj, 0)] < 0) & (box < 0)
        ok = ~self.walls[r, y, x] & ((obj < 0) | (obj == box) | ramp_ok)
        if agents_block:
            other = self.agent_at[r, y, x]
            ok &= (other < 0) | (other == agent)
        return ok

    def _carried(self, r: np.ndarray, ahead: np.ndarray, hold: np.ndarray) -> np.ndarray:
        """The object a move carries: the one held, else a box pushed (``-1``: none).

        An agent holding nothing pushes the box in the cell it moves into if that box is
        unlocked, held by nobody and not a ramp (walking into a ramp climbs it)."""
        obj = self.box_at[r, ahead[..., 0], ahead[..., 1]]
        some = np.maximum(obj, 0)
        push = (hold < 0) & (obj >= 0) & ~self.is_ramp_ext[obj]
        push &= (self.box_lock[r, some] == UNLOCKED) & (self.box_holder[r, some] < 0)
        return np.where(push, obj, hold)

    def _vault_to(self, r: np.ndarray, pos: np.ndarray, step: np.ndarray, box, agents_block: bool = True):
        """``(ok, landing)``: the move vaults from a ramp over a wall or box onto ``landing``."""
        over, land = pos + step, pos + 2 * step
        inside = ((land >= 0) & (land < self.size)).all(-1)
        land = np.clip(land, 0, self.size - 1)
        on_ramp = self.is_ramp_ext[self.box_at[r, pos[..., 0], pos[..., 1]]]
        mid = self.box_at[r, over[..., 0], over[..., 1]]
        barrier = self.walls[r, over[..., 0], over[..., 1]] | ((mid >= 0) & ~self.is_ramp_ext[mid])
        far = self.box_at[r, land[..., 0], land[..., 1]]
        ok = on_ramp & (box < 0) & barrier & inside & ~self.walls[r, land[..., 0], land[..., 1]] & (far < 0)
        if agents_block:
            ok &= self.agent_at[r, land[..., 0], land[..., 1]] < 0
        return ok, land

    def _move(self, r: np.ndarray, a: np.ndarray, act: np.ndarray) -> None:
        """Walk (and move the held object), or vault from a ramp."""
        step = MOVES[act - 1]
        pos, hold = self.agent_pos[r, a], self.holding[r, a]
        box = self._carried(r, pos + step, hold)
        held = box >= 0
        box_pos = np.where(held[:, None], self.box_pos[r, np.maximum(box, 0)], pos)
        new_box_pos = box_pos + step
        walk = self._walkable(r, pos + step, a, box) & (~held | self._free(r, new_box_pos, a, box))
        vault, land = self._vault_to(r, pos, step, hold)
        vault &= ~walk
        new_pos = np.where(vault[:, None], land, pos + step)
        ok = walk | vault
        self.vaulted[r[vault], a[vault]] = True
        self._relocate(r[ok], a[ok], box[ok], pos[ok], box_pos[ok], new_pos[ok], new_box_pos[ok])

    def _targets(self, r: np.ndarray, agent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v0's targets, except that a ramp with an agent on it cannot be grabbed."""
        cells = self.agent_pos[r, agent][..., None, :] + MOVES
        rr = r[..., None]
        adj = self.box_at[rr, cells[..., 0], cells[..., 1]]
        some = np.maximum(adj, 0)
        lock = self.box_lock[rr, some]
        stood_on = self.is_ramp_ext[adj] & (self.agent_at[rr, cells[..., 0], cells[..., 1]] >= 0)
        free = (adj >= 0) & (lock == UNLOCKED) & (self.box_holder[rr, some] < 0) & ~stood_on
        toggle = free | ((adj >= 0) & (lock == self.team[agent][..., None]))

        def first(ok: np.ndarray) -> np.ndarray:
            return np.where(ok.any(-1), np.take_along_axis(adj, ok.argmax(-1)[..., None], -1)[..., 0], -1)

        return first(free), first(toggle)

    # ------------------------------------------------------------ perception
    def action_masks(self) -> np.ndarray:
        """v0's masks, moves by v1's rules (walk or vault; other agents ignored)."""
        masks = super().action_masks()
        r = self._rows[:, None, None]
        pos, hold = self.agent_pos[:, :, None, :], self.holding[:, :, None]
        box = self._carried(r, pos + MOVES, hold)
        held = box >= 0
        box_pos = np.where(held[..., None], self.box_pos[r, np.maximum(box, 0)], pos)
        new_box_pos = np.clip(box_pos + MOVES, 0, self.size - 1)  # a pushed box is never on the border
        walk = self._walkable(r, pos + MOVES, -1, box, False) & (~held | self._free(r, new_box_pos, -1, box, False))
        vault, _ = self._vault_to(r, np.broadcast_to(pos, (*pos.shape[:2], 4, 2)), MOVES, hold, False)
        frozen = (self.team == SEEKERS)[None] & (self.t < self.prep_steps)[:, None]
        stop = frozen | (self.t >= self.max_steps)[:, None]
        masks[..., 1:5] = (walk | vault) & ~stop[..., None]
        return masks

    def visibility(self) -> np.ndarray:
        """``vis[e, i, j]``: ``i`` sees ``j``: within radius and no wall or box between, except
        that walls and boxes next to (8-neighbourhood) an agent standing on a ramp do not count.
        Also keeps the ground-only sight for ``ramp_use``."""
        is_box = (self.box_at >= 0) & ~self.is_ramp_ext[self.box_at]
        near, offsets, blocked = grid.sight_cells(self.agent_pos, self.walls | is_box,
                                                  self._in_range, self._between)
        self._ground_vis = near & ~blocked.any(-1)
        up = self.elevated()
        if not up.any():
            self._last_vis = self._ground_vis
            return self._last_vis
        rel = self.agent_pos[:, None, :, :] - self.agent_pos[:, :, None, :]
        by_observer = (np.abs(offsets) <= 1).all(-1) & up[:, :, None, None]
        by_target = (np.abs(offsets - rel[..., None, :]) <= 1).all(-1) & up[:, None, :, None]
        self._last_vis = near & ~(blocked & ~by_observer & ~by_target).any(-1)
        return self._last_vis

    def observe(self, vis: np.ndarray | None = None) -> np.ndarray:
        """v0's observation (boxes channel = boxes and ramps) + a ramps window + on-ramp flag."""
        base = super().observe(vis)
        ramps = self.is_ramp_ext[self.box_at]
        maps = np.stack([self.walls, ramps], 1)
        order = np.ones((self.n_agents, 1), dtype=np.int64)
        plane = grid.windows(maps, self.agent_pos, order, self.view_size).astype(np.float32)
        up = self.elevated()[..., None].astype(np.float32)
        return np.concatenate([base, plane.reshape(self.n_envs, self.n_agents, -1), up], -1)


__all__ = ["HideAndSeekV1Core"]
