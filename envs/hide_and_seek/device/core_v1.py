"""``hide_and_seek-v1`` as a batched torch program: :class:`TorchHideAndSeekV1Core`.

The rules, observations, masks, rewards and phase detectors of
:class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core` (ramps: stepping on, vaulting,
sight over the neighbouring walls and boxes from a ramp), step for step on ``cpu`` or
``cuda`` (checked by ``tests/envs/test_device_hide_and_seek_v1.py``). It subclasses
:class:`~envs.hide_and_seek.device.core.TorchHideAndSeekCore` as the numpy v1 core subclasses
v0's: ramps are extra objects after the boxes (``box_*`` tensors), flagged by
``is_ramp``. Layouts are drawn on the host by the numpy v1 layout code at reset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.device.core import _CONSTANTS, LayoutBank, TorchHideAndSeekCore
from envs.hide_and_seek.layouts_v1 import LayoutV1, vault_spots
from envs.hide_and_seek.rules import HIDERS, SEEKERS, UNLOCKED

Tensor = torch.Tensor


@dataclass
class LayoutBankV1(LayoutBank):
    """:class:`LayoutBank` with the ramps after the boxes, plus the hiders' rooms and their
    :func:`~envs.hide_and_seek.layouts_v1.vault_spots`, each ``(k, size, size)``."""

    room: Tensor
    vault: Tensor

    @classmethod
    def from_layouts(cls, layouts: list[LayoutV1], device: str | torch.device) -> LayoutBankV1:
        merged = [grid.Layout(walls=lay.walls, doors=lay.doors, hiders=lay.hiders, seekers=lay.seekers,
                              boxes=np.concatenate([lay.boxes.reshape(-1, 2), lay.ramps.reshape(-1, 2)]),
                              box_locks=np.concatenate([lay.box_locks, lay.ramp_locks]))
                  for lay in layouts]
        base = LayoutBank.from_layouts(merged, device)
        room = torch.as_tensor(np.stack([lay.room for lay in layouts]), device=device)
        vault = torch.as_tensor(np.stack([vault_spots(lay.walls, lay.room, lay.doors) for lay in layouts]),
                                device=device)
        return cls(**vars(base), room=room, vault=vault)


class TorchHideAndSeekV1Core(TorchHideAndSeekCore):
    """Steps ``n_envs`` ``hide_and_seek-v1`` episodes at once on ``device``.

    Takes :class:`HideAndSeekV1Core`'s config plus ``device``; extra state
    tensors (``room``, ``vault``, ``vaulted``, ``seen_steps``, ``ramp_used``) as in the numpy core.
    """

    _reference = HideAndSeekV1Core
    _constants = (*_CONSTANTS, "n_real_boxes", "n_ramps", "layout", "is_ramp", "ramp_by_door",
                  "ramp_reach")

    def _allocate(self) -> None:
        super()._allocate()
        n, a, s, dev = self.n_envs, self.n_agents, self.size, self.device
        # Index ``obj + 1`` (obj -1: no object, not a ramp).
        self._ramp_pad = torch.as_tensor(np.append(False, self.is_ramp), device=dev)
        self._ramp_ids = torch.as_tensor(np.flatnonzero(self.is_ramp), device=dev)
        self.room = torch.zeros((n, s, s), dtype=torch.bool, device=dev)
        self.vault = torch.zeros((n, s, s), dtype=torch.bool, device=dev)
        self.vaulted = torch.zeros((n, a), dtype=torch.bool, device=dev)
        self._ground_vis = torch.zeros((n, a, a), dtype=torch.bool, device=dev)
        self._last_vis = self._ground_vis
        self.seen_steps = torch.zeros(n, dtype=torch.int64, device=dev)
        self.ramp_used = torch.zeros(n, dtype=torch.bool, device=dev)
        self._prep_ramps = torch.zeros(n, dtype=torch.bool, device=dev)

    # ----------------------------------------------------------------- episodes
    def draw_layouts(self, seeds: list[int] | np.ndarray) -> LayoutBankV1:
        """v1's layouts of ``seeds`` under this core's settings (drawn on the host), on the device."""
        self._host.box_by_door = self.box_by_door  # a trainer may change the curriculum's shares
        self._host.ramp_by_door, self._host.ramp_reach = self.ramp_by_door, self.ramp_reach
        return LayoutBankV1.from_layouts([self._host.draw_layout(int(seed)) for seed in seeds], self.device)

    def set_layout(self, row: int, layout: LayoutV1) -> None:
        """Start env ``row`` from ``layout`` (e.g. :func:`envs.hide_and_seek.layouts_v1.parse_layout`)."""
        self.reset_from_bank(LayoutBankV1.from_layouts([layout], self.device),
                             torch.zeros(1, dtype=torch.int64, device=self.device),
                             torch.tensor([row], device=self.device))

    def reset_from_bank(self, bank: LayoutBankV1, picks: Tensor,
                        rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        obs, masks = super().reset_from_bank(bank, picks, rows)
        rows = torch.arange(self.n_envs, device=self.device) if rows is None else rows
        self._prep_ramps[rows] = self.ramps_defended()[rows]
        return obs, masks

    def _load_rows(self, rows: Tensor, bank: LayoutBankV1, picks: Tensor) -> None:
        super()._load_rows(rows, bank, picks)
        self.room[rows] = bank.room[picks]
        self.vault[rows] = bank.vault[picks]
        self.vaulted[rows] = False
        self.seen_steps[rows] = 0
        self.ramp_used[rows] = False

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """As :meth:`TorchHideAndSeekCore.step`, then the phase detectors advance."""
        live = self.t < self.max_steps
        rewarded = live & (self.t >= self.prep_steps)
        self.vaulted.zero_()
        out = super().step(actions)
        self.seen_steps += self.seen & rewarded
        seekers, hiders = self.team_t == SEEKERS, self.team_t == HIDERS
        up = self.elevated()[:, seekers]
        extra = (self._last_vis & ~self._ground_vis)[:, seekers][:, :, hiders].any(-1)
        self.ramp_used |= live & (self.vaulted[:, seekers] | (up & extra)).any(-1)
        now = live & (self.t == self.prep_steps)
        self._prep_ramps = torch.where(now, self.ramps_defended(), self._prep_ramps)
        return out

    def _door_status(self) -> Tensor:
        """``(n_envs, 2)``: all doors hold a box (ramps do not count); ... locked by hiders."""
        objs = self._at(self.box_at, self.doors)
        blocked = ((objs >= 0) & ~self._ramp(objs)).all(1)
        locks = self.box_lock.gather(1, objs.clamp(min=0))
        return torch.stack([blocked, blocked & (locks == HIDERS).all(1)], 1)

    def ramps_defended(self) -> Tensor:
        """``(n_envs,)``: every ramp is inside the room, or locked by the hiders off the vault spots."""
        if self.n_ramps == 0:
            return torch.zeros(self.n_envs, dtype=torch.bool, device=self.device)
        pos = self.box_pos[:, self._ramp_ids]
        locked = (self.box_lock[:, self._ramp_ids] == HIDERS) & ~self._at(self.vault, pos)
        return (self._at(self.room, pos) | locked).all(1)

    def phases(self) -> dict[str, Tensor]:
        """Phase detectors (see :meth:`HideAndSeekV1Core.phases`), each ``(n_envs,)`` float64."""
        post = max(self.max_steps - self.prep_steps, 1)
        done_prep = self.t >= self.prep_steps
        defended = torch.where(done_prep, self._prep_ramps, self.ramps_defended())
        return {
            "chasing": self.seen_steps.to(torch.float64) / post,
            "fort": self.door_block_status(locked=False).to(torch.float64),
            "ramp_use": self.ramp_used.to(torch.float64),
            "ramp_defense": defended.to(torch.float64),
        }

    def critic_state(self) -> Tensor:
        """``(n_envs, d)`` float32, equal to :meth:`HideAndSeekV1Core.critic_state`."""
        n, f64 = self.n_envs, torch.float64
        post = max(self.max_steps - self.prep_steps, 1)
        extra = [
            self.elevated(),
            torch.stack([self.ramps_defended().to(f64), self.seen_steps.to(f64) / post,
                         self.ramp_used.to(f64)], 1),
            self.room.reshape(n, -1),
        ]
        return torch.cat([super().critic_state(), *(p.to(f64).to(torch.float32) for p in extra)], 1)

    def door_fraction(self) -> Tensor:
        """``(n_envs,)`` float64: share of the room's distinct doors holding a box (shaping)."""
        return self._per_door(lambda dist: (dist == 0).to(torch.float64))

    def fort_potential(self) -> Tensor:
        """``(n_envs,)`` float64 in ``[0, 1]``, as :meth:`HideAndSeekV1Core.fort_potential` (shaping)."""
        return self._per_door(lambda dist: torch.where(dist == 0, 1.0, 0.5 * (1.0 - dist.double() / self.size)))

    def _per_door(self, value) -> Tensor:
        boxes = self.box_pos[:, torch.as_tensor(~self.is_ramp, device=self.device)]
        if boxes.shape[1] == 0:
            return torch.zeros(self.n_envs, dtype=torch.float64, device=self.device)
        v = value((self.doors[:, :, None, :] - boxes[:, None, :, :]).abs().sum(-1).amin(-1))
        same = (self.doors[:, 0] == self.doors[:, 1]).all(-1)
        return torch.where(same, v[:, 0], v.mean(1))

    # ----------------------------------------------------------------- dynamics
    def _ramp(self, obj: Tensor) -> Tensor:
        """Object ids (-1: none) that are ramps."""
        return self._ramp_pad[obj + 1]

    def _of(self, table: Tensor, obj: Tensor) -> Tensor:
        """``table[e, obj]`` ``(n, k)`` for object ids ``obj`` ``(n, ...)`` (-1 reads object 0)."""
        n = len(obj)
        return table.gather(1, obj.clamp(min=0).reshape(n, -1)).view(obj.shape)

    def elevated(self) -> Tensor:
        """``(n_envs, n_agents)`` bool: the agent stands on a ramp."""
        return self._ramp(self._at(self.box_at, self.agent_pos))

    def _walkable(self, cells: Tensor, agent: Tensor | int, box: Tensor, agents_block: bool = True) -> Tensor:
        """Cells the agent may walk into: v0's rule, plus a ramp nobody holds if it holds nothing."""
        obj = self._at(self.box_at, cells)
        ramp_ok = self._ramp(obj) & (self._of(self.box_holder, obj) < 0) & (box < 0)
        ok = ~self._at(self.walls, cells) & ((obj < 0) | (obj == box) | ramp_ok)
        if agents_block:
            other = self._at(self.agent_at, cells)
            ok &= (other < 0) | (other == agent)
        return ok

    def _carried(self, ahead: Tensor, hold: Tensor) -> Tensor:
        """The object a move carries: the one held, else an unlocked box nobody holds that it pushes."""
        obj = self._at(self.box_at, ahead)
        push = (hold < 0) & (obj >= 0) & ~self._ramp(obj)
        push &= (self._of(self.box_lock, obj) == UNLOCKED) & (self._of(self.box_holder, obj) < 0)
        return torch.where(push, obj, hold)

    def _vault_to(self, pos: Tensor, step: Tensor, box: Tensor,
                  agents_block: bool = True) -> tuple[Tensor, Tensor]:
        """``(ok, landing)``: the move vaults from a ramp over a wall or box onto ``landing``."""
        over, land = pos + step, pos + 2 * step
        inside = ((land >= 0) & (land < self.size)).all(-1)
        land = land.clamp(0, self.size - 1)
        on_ramp = self._ramp(self._at(self.box_at, pos))
        mid = self._at(self.box_at, over)
        barrier = self._at(self.walls, over) | ((mid >= 0) & ~self._ramp(mid))
        ok = on_ramp & (box < 0) & barrier & inside & ~self._at(self.walls, land)
        ok &= self._at(self.box_at, land) < 0
        if agents_block:
            ok &= self._at(self.agent_at, land) < 0
        return ok, land

    def _move(self, agent: Tensor, act: Tensor) -> None:
        """Walk (and move the held object), or vault from a ramp."""
        step = self._moves[(act - 1).clamp(0, 3)]
        pos, hold = self._row(self.agent_pos, agent), self._row(self.holding, agent)
        box = self._carried(pos + step, hold)
        held = box >= 0
        box_pos = torch.where(held[:, None], self._row(self.box_pos, box), pos)
        new_box_pos = box_pos + step
        is_move = (act >= 1) & (act <= 4)
        walk = is_move & self._walkable(pos + step, agent, box) & (~held | self._free(new_box_pos, agent, box))
        vault, land = self._vault_to(pos, step, hold)
        vault &= is_move & ~walk
        new_pos = torch.where(vault[:, None], land, pos + step)
        ok = walk | vault
        self._put(self.vaulted, agent, vault, vault)
        self._relocate(agent, box, (pos, new_pos), (box_pos, new_box_pos), ok, ok & held)

    def _ungrabbable(self, adj: Tensor, pos: Tensor) -> Tensor:
        """A ramp with an agent on it cannot be grabbed."""
        cells = pos[:, :, None, :] + self._moves
        return self._ramp(adj) & (self._at(self.agent_at, cells) >= 0)

    # ------------------------------------------------------------ perception
    def action_masks(self) -> Tensor:
        """v0's masks, moves by v1's rules (walk or vault; other agents ignored)."""
        masks = super().action_masks()
        pos, hold = self.agent_pos[:, :, None, :], self.holding[:, :, None]
        box = self._carried(pos + self._moves, hold)
        held = box >= 0
        n, a = box.shape[:2]
        carried_pos = self._row_all(self.box_pos, box.reshape(n, -1)).view(n, a, 4, 2)
        box_pos = torch.where(held[..., None], carried_pos, pos)
        walk = self._walkable(pos + self._moves, -1, box, False)
        walk &= ~held | self._free((box_pos + self._moves).clamp(0, self.size - 1), -1, box, False)
        vault, _ = self._vault_to(pos.expand(-1, -1, 4, -1), self._moves, hold, False)
        frozen = (self.team_t == SEEKERS)[None] & (self.t < self.prep_steps)[:, None]
        stop = frozen | (self.t >= self.max_steps)[:, None]
        masks[..., 1:5] = (walk | vault) & ~stop[..., None]
        return masks

    @staticmethod
    def _row_all(table: Tensor, index: Tensor) -> Tensor:
        """``table[e, index[e, i]]`` ``(n, m, 2)`` for ``table`` ``(n, k, 2)``, ``index`` ``(n, m)``."""
        return table.gather(1, index.clamp(min=0)[..., None].expand(-1, -1, 2))

    def visibility(self) -> Tensor:
        """As :meth:`HideAndSeekV1Core.visibility` (ramps low; sight over an on-ramp agent's neighbours).

        Also keeps the ground-only sight for ``ramp_use``.
        """
        n, pos, rad = self.n_envs, self.agent_pos, self.vision_radius
        blocks = (self.walls | ((self.box_at >= 0) & ~self._ramp(self.box_at))).view(n, -1)
        rel = pos[:, None, :, :] - pos[:, :, None, :]  # target minus observer
        idx = rel.clamp(-rad, rad) + rad
        eye = torch.eye(self.n_agents, dtype=torch.bool, device=self.device)
        near = (rel.abs() <= rad).all(-1) & self._in_range_t[idx[..., 0], idx[..., 1]] & ~eye
        offsets = self._between_t[idx[..., 0], idx[..., 1]]  # (n, a, a, L, 2)
        cells = (pos[:, :, None, None, :] + offsets).clamp(0, self.size - 1)
        flat = (cells[..., 0] * self.size + cells[..., 1]).view(n, -1)
        blocked = blocks.gather(1, flat).view(cells.shape[:-1])
        self._ground_vis = near & ~blocked.any(-1)
        up = self.elevated()
        by_observer = (offsets.abs() <= 1).all(-1) & up[:, :, None, None]
        by_target = ((offsets - rel[..., None, :]).abs() <= 1).all(-1) & up[:, None, :, None]
        self._last_vis = near & ~(blocked & ~by_observer & ~by_target).any(-1)
        return self._last_vis

    def observe(self, vis: Tensor | None = None) -> Tensor:
        """v0's observation (boxes channel = boxes and ramps) + a ramps window + on-ramp flag."""
        base = super().observe(vis)
        n, a = self.n_envs, self.n_agents
        maps = torch.stack([self.walls, self._ramp(self.box_at)], 1)
        order = torch.ones((a, 1), dtype=torch.int64, device=self.device)
        plane = self.windows(maps, order).to(torch.float32).view(n, a, -1)
        up = self.elevated()[..., None].to(torch.float32)
        return torch.cat([base, plane, up], -1)


__all__ = ["LayoutBankV1", "TorchHideAndSeekV1Core"]
