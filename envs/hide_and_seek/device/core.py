"""``hide_and_seek-v0`` as a batched torch program: :class:`TorchHideAndSeekCore`.

The rules, observations, masks, rewards and door statistics of
:class:`envs.hide_and_seek.core.HideAndSeekCore`, step for step (checked by
``tests/envs/test_device_hide_and_seek.py`` over 10,000 random episodes), on ``cpu`` or
``cuda``. Where the numpy core picks rows (``act == GRAB`` ...), this one computes every
row and writes under a mask, so nothing waits for the host during an episode.

Layouts are drawn on the host (:func:`envs.hide_and_seek.layouts.random_layout`, the very
layouts of v0's seeds) and uploaded in one copy per reset; :class:`LayoutBank` keeps a
set of them on the device so that resets need no host work at all (training and
benchmarks; a bank of ``k`` layouts is v0's layout distribution restricted to ``k``
draws).

Later versions (v1: :mod:`envs.hide_and_seek.device.core_v1`) extend this one: every rule is a method
(``_move``, ``_grab``, ``_lock``, ``action_masks``, ``observe``) over plain state tensors,
so a subclass adds its state in ``_allocate`` / ``_load_rows`` and overrides the
rules that change, and its differential test reuses this one's with the v1 numpy core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from envs.hide_and_seek import layouts as grid
from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.device.view import TorchPerception
from envs.hide_and_seek.layouts import Layout
from envs.hide_and_seek.rules import GRAB, HIDERS, LOCK, MOVES, NOOP, NUM_ACTIONS, SEEKERS, UNLOCKED

Tensor = torch.Tensor


@dataclass
class LayoutBank:
    """Episode starts on the device: ``(k, ...)`` stacks of :class:`Layout` fields."""

    walls: Tensor
    doors: Tensor
    agents: Tensor
    boxes: Tensor
    box_locks: Tensor

    def __len__(self) -> int:
        return len(self.walls)

    @classmethod
    def from_layouts(cls, layouts: list[Layout], device: str | torch.device) -> LayoutBank:
        """Stack layouts (one host-to-device copy per field)."""
        def stack(values: list[np.ndarray]) -> Tensor:
            return torch.as_tensor(np.stack(values), device=device).to(torch.int64)

        return cls(
            walls=torch.as_tensor(np.stack([lay.walls for lay in layouts]), device=device),
            doors=stack([lay.doors for lay in layouts]),
            agents=stack([np.concatenate([lay.hiders, lay.seekers]) for lay in layouts]),
            boxes=stack([lay.boxes.reshape(-1, 2) for lay in layouts]),
            box_locks=stack([lay.box_locks for lay in layouts]),
        )


_CONSTANTS = ("config", "size", "n_hiders", "n_seekers", "n_agents", "n_boxes", "team", "max_steps",
              "prep_steps", "vision_radius", "view_size", "n_doors", "box_by_door",
              "seekers_by_door", "obs_dim", "_in_range", "_between")


class TorchHideAndSeekCore(TorchPerception):
    """Steps ``n_envs`` hide-and-seek episodes at once on ``device``.

    Takes :class:`HideAndSeekCore`'s config (validated by it) plus ``device``.
    Masks, sight and observations come from :class:`~envs.hide_and_seek.device.view.TorchPerception`.
    State tensors have the numpy core's names and meanings; all are int64 except
    ``walls``, ``seen`` and ``_prep_doors`` (bool). Call :meth:`reset` first.
    """

    _reference: type[HideAndSeekCore] = HideAndSeekCore  # the numpy core this one mirrors
    _constants: tuple[str, ...] = _CONSTANTS

    def __init__(self, n_envs: int = 1, config: HideAndSeekConfig | None = None, *,
                 device: str | torch.device = "cpu") -> None:
        ref = self._reference(1, config)  # validates; the rules' constants come from it
        for name in self._constants:
            setattr(self, name, getattr(ref, name))
        self._host = ref  # a one-env numpy core, for host-side helpers (layout draws)
        self.n_envs, self.device = n_envs, torch.device(device)
        dev = self.device
        self.team_t = torch.as_tensor(self.team, device=dev)
        self._moves = torch.as_tensor(MOVES, device=dev)
        self._in_range_t = torch.as_tensor(self._in_range, device=dev)
        self._between_t = torch.as_tensor(self._between, device=dev)
        half = self.view_size // 2
        offsets = torch.arange(self.view_size, device=dev)
        self._win_dy, self._win_dx = offsets[:, None], offsets[None, :]
        self._half = half
        # Own-team locks first: seekers read the two lock maps swapped (as the numpy core).
        order = np.where((self.team == SEEKERS)[:, None], [0, 1, 3, 2], [0, 1, 2, 3])
        self._order = torch.as_tensor(order, device=dev)
        self._allocate()

    def _allocate(self) -> None:
        n, a, b, s, dev = self.n_envs, self.n_agents, max(self.n_boxes, 1), self.size, self.device
        i64 = {"dtype": torch.int64, "device": dev}
        self.walls = torch.ones((n, s, s), dtype=torch.bool, device=dev)
        self.doors = torch.zeros((n, 2, 2), **i64)
        self.agent_pos = torch.zeros((n, a, 2), **i64)
        self.box_pos = torch.zeros((n, b, 2), **i64)
        self.box_lock = torch.full((n, b), UNLOCKED, **i64)
        self.box_holder = torch.full((n, b), -1, **i64)
        self.holding = torch.full((n, a), -1, **i64)
        self.agent_at = torch.full((n, s, s), -1, **i64)
        self.box_at = torch.full((n, s, s), -1, **i64)
        self.t = torch.zeros(n, **i64)
        self.seen = torch.zeros(n, dtype=torch.bool, device=dev)
        self._prep_doors = torch.zeros((n, 2), dtype=torch.bool, device=dev)

    # ----------------------------------------------------------------- episodes
    def draw_layouts(self, seeds: list[int] | np.ndarray) -> LayoutBank:
        """v0's layouts of ``seeds`` (drawn on the host), on the device."""
        counts = (self.n_hiders, self.n_seekers, self.n_boxes)
        layouts = [grid.random_layout(self.size, *counts, int(seed), self.n_doors,
                                      self.box_by_door, self.seekers_by_door) for seed in seeds]
        return LayoutBank.from_layouts(layouts, self.device)

    def reset(self, seeds: list[int] | np.ndarray, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Start episodes with v0's layouts of ``seeds`` in ``rows`` (default: all).

        Returns:
            ``obs`` ``(n_envs, n_agents, obs_dim)`` float32 and ``masks`` ``(n_envs, n_agents, 7)``.
        """
        bank = self.draw_layouts(seeds)
        return self.reset_from_bank(bank, torch.arange(len(bank), device=self.device), rows)

    def reset_from_bank(self, bank: LayoutBank, picks: Tensor,
                        rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Start episodes in ``rows`` from ``bank[picks]``, without leaving the device."""
        rows = torch.arange(self.n_envs, device=self.device) if rows is None else rows
        if len(picks) != len(rows):
            raise ValueError(f"{len(rows)} envs to reset but {len(picks)} layouts")
        self._load_rows(rows, bank, picks)
        vis = self.visibility()
        self.seen[rows] = self._hiders_seen(vis)[rows]
        self._prep_doors[rows] = self._door_status()[rows]
        return self.observe(vis), self.action_masks()

    def set_layout(self, row: int, layout: Layout) -> None:
        """Start env ``row`` from ``layout`` (e.g. :func:`grid.parse_layout`) at step 0."""
        self.reset_from_bank(LayoutBank.from_layouts([layout], self.device),
                             torch.zeros(1, dtype=torch.int64, device=self.device),
                             torch.tensor([row], device=self.device))

    def _load_rows(self, rows: Tensor, bank: LayoutBank, picks: Tensor) -> None:
        want = (self.size, self.n_agents, self.n_boxes)
        got = (bank.walls.shape[-1], bank.agents.shape[1], bank.boxes.shape[1])
        if got != want:
            raise ValueError(f"layouts (size, agents, boxes) {got}: this core needs {want}")
        k, s, nb = len(rows), self.size, self.n_boxes
        self.walls[rows] = bank.walls[picks]
        self.doors[rows] = bank.doors[picks]
        pos = bank.agents[picks]
        self.agent_pos[rows] = pos
        self.holding[rows] = -1
        self.box_holder[rows] = -1
        ids = torch.arange(self.n_agents, device=self.device).expand(k, -1)
        agent_at = torch.full((k, s * s), -1, dtype=torch.int64, device=self.device)
        self.agent_at[rows] = agent_at.scatter(1, pos[..., 0] * s + pos[..., 1], ids).view(k, s, s)
        box_at = torch.full((k, s * s), -1, dtype=torch.int64, device=self.device)
        if nb:
            boxes = bank.boxes[picks]
            self.box_pos[rows, :nb] = boxes
            self.box_lock[rows, :nb] = bank.box_locks[picks]
            ids = torch.arange(nb, device=self.device).expand(k, -1)
            box_at.scatter_(1, boxes[..., 0] * s + boxes[..., 1], ids)
        self.box_at[rows] = box_at.view(k, s, s)
        self.t[rows] = 0

    def _hiders_seen(self, vis: Tensor) -> Tensor:
        return vis[:, self.team_t == SEEKERS][:, :, self.team_t == HIDERS].any(2).any(1)

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Advance every unfinished env by one step (see :meth:`HideAndSeekCore.step`).

        Args:
            actions: ``(n_envs, n_agents)`` ints; illegal or out-of-range ones act as noop.
        """
        actions = actions.to(self.device, torch.int64).view(self.n_envs, self.n_agents)
        live = self.t < self.max_steps
        safe = torch.where((actions >= 0) & (actions < NUM_ACTIONS), actions, NOOP)
        legal = self.action_masks().gather(2, safe[..., None])[..., 0]
        acts = torch.where(legal & live[:, None], safe, NOOP)
        for k in range(self.n_agents):
            agent = (self.t + k) % self.n_agents
            act = acts.gather(1, agent[:, None])[:, 0]
            self._move(agent, act)
            self._grab(agent, act)
            self._lock(agent, act)
        rewarded = live & (self.t >= self.prep_steps)
        self.t += live
        vis = self.visibility()
        self.seen = self._hiders_seen(vis)
        team_reward = torch.where(self.seen, -1.0, 1.0) * rewarded
        rewards = torch.where(self.team_t == HIDERS, team_reward[:, None], -team_reward[:, None])
        now = live & (self.t == self.prep_steps)
        self._prep_doors = torch.where(now[:, None], self._door_status(), self._prep_doors)
        dones = self.t >= self.max_steps
        return self.observe(vis), rewards, dones, self.action_masks()

    def door_block_status(self, locked: bool = False) -> Tensor:
        """``(n_envs,)`` bool (see :meth:`HideAndSeekCore.door_block_status`)."""
        current = self._door_status()[:, int(locked)]
        return torch.where(self.t >= self.prep_steps, self._prep_doors[:, int(locked)], current)

    def _door_status(self) -> Tensor:
        """``(n_envs, 2)``: all doors hold a box; all doors hold a box locked by hiders."""
        boxes = self._at(self.box_at, self.doors)
        blocked = (boxes >= 0).all(1)
        locks = self.box_lock.gather(1, boxes.clamp(min=0))
        return torch.stack([blocked, blocked & (locks == HIDERS).all(1)], 1)

    def critic_state(self) -> Tensor:
        """``(n_envs, d)`` float32, equal to :meth:`HideAndSeekCore.critic_state` (same features,
        computed in float64 and rounded)."""
        n, scale, dev = self.n_envs, self.size - 1, self.device
        boxes = self.box_pos.shape[1]
        f64 = torch.float64
        locks = torch.tensor([UNLOCKED, HIDERS, SEEKERS], device=dev)
        parts = [
            self.agent_pos.reshape(n, -1).to(f64) / scale,
            self.holding[..., None] == torch.arange(boxes, device=dev),
            self.box_pos.reshape(n, -1).to(f64) / scale,
            self.box_lock[..., None] == locks,
            self.doors.reshape(n, -1).to(f64) / scale,
            self._door_status(),
            torch.stack([self.t.to(f64) / self.max_steps, (self.t < self.prep_steps).to(f64),
                         self.seen.to(f64)], 1),
            self.walls,
        ]
        return torch.cat([p.reshape(n, -1).to(f64) for p in parts], 1).to(torch.float32)

    # ----------------------------------------------------------------- helpers
    def _at(self, grid_map: Tensor, cells: Tensor) -> Tensor:
        """``grid_map[e, y, x]`` for cells ``(n, ..., 2)`` of each env ``e``."""
        flat = cells[..., 0] * self.size + cells[..., 1]
        n = len(flat)
        return grid_map.reshape(n, -1).gather(1, flat.reshape(n, -1)).view(flat.shape)

    def _set(self, grid_map: Tensor, cells: Tensor, value: Tensor, cond: Tensor) -> None:
        """``grid_map[e, y, x] = value`` where ``cond``, for one cell ``(n, 2)`` per env."""
        flat = (cells[:, 0] * self.size + cells[:, 1])[:, None]
        view = grid_map.view(len(flat), -1)
        view.scatter_(1, flat, torch.where(cond[:, None], value[:, None], view.gather(1, flat)))

    @staticmethod
    def _put(table: Tensor, index: Tensor, value: Tensor, cond: Tensor) -> None:
        """``table[e, index] = value`` where ``cond`` (``table`` ``(n, k)`` or ``(n, k, 2)``)."""
        idx = index.clamp(min=0).view(-1, 1, *([1] * (table.dim() - 2)))
        idx = idx.expand(-1, 1, *table.shape[2:])
        c = cond.view(-1, *([1] * (table.dim() - 1)))
        v = value.view(idx.shape)
        table.scatter_(1, idx, torch.where(c, v, table.gather(1, idx)))

    @staticmethod
    def _row(table: Tensor, index: Tensor) -> Tensor:
        """``table[e, index[e]]`` for ``table`` ``(n, k)`` or ``(n, k, 2)``."""
        idx = index.clamp(min=0).view(-1, 1, *([1] * (table.dim() - 2)))
        return table.gather(1, idx.expand(-1, 1, *table.shape[2:]))[:, 0]

    # ----------------------------------------------------------------- dynamics
    def _free(self, cells: Tensor, agent: Tensor | int, box: Tensor,
              agents_block: bool = True) -> Tensor:
        """Cells that agent ``agent`` holding ``box`` (-1: none) may enter."""
        other_box = self._at(self.box_at, cells)
        ok = ~self._at(self.walls, cells) & ((other_box < 0) | (other_box == box))
        if agents_block:
            other_agent = self._at(self.agent_at, cells)
            ok &= (other_agent < 0) | (other_agent == agent)
        return ok

    def _move(self, agent: Tensor, act: Tensor) -> None:
        """Move agents (and the box each holds: pushed, pulled or dragged sideways)."""
        step = self._moves[(act - 1).clamp(0, 3)]
        pos, box = self._row(self.agent_pos, agent), self._row(self.holding, agent)
        held = box >= 0
        box_pos = torch.where(held[:, None], self._row(self.box_pos, box), pos)
        new_pos, new_box_pos = pos + step, box_pos + step
        ok = (act >= 1) & (act <= 4) & self._free(new_pos, agent, box)
        ok &= ~held | self._free(new_box_pos, agent, box)
        self._relocate(agent, box, (pos, new_pos), (box_pos, new_box_pos), ok, ok & held)

    def _relocate(self, agent: Tensor, box: Tensor, agent_move: tuple[Tensor, Tensor],
                  box_move: tuple[Tensor, Tensor], ok: Tensor, box_ok: Tensor) -> None:
        """Move ``agent`` (where ``ok``) and ``box`` (where ``box_ok``) between ``(from, to)`` cells."""
        none = torch.full_like(agent, -1)
        self._set(self.agent_at, agent_move[0], none, ok)
        self._set(self.box_at, box_move[0], none, box_ok)
        self._set(self.agent_at, agent_move[1], agent, ok)
        self._set(self.box_at, box_move[1], box, box_ok)
        self._put(self.agent_pos, agent, agent_move[1], ok)
        self._put(self.box_pos, box, box_move[1], box_ok)

    def _targets(self, agent: Tensor) -> tuple[Tensor, Tensor]:
        """First adjacent box each agent could grab, and could lock or unlock (-1: none).

        ``agent`` is ``(n,)`` (one agent per env) or ``(n, n_agents)``.
        """
        n = len(agent)
        idx = agent.reshape(n, -1)
        pos = self.agent_pos.gather(1, idx[..., None].expand(-1, -1, 2))  # (n, m, 2)
        adj = self._at(self.box_at, pos[:, :, None, :] + self._moves)  # (n, m, 4)
        some = adj.clamp(min=0).view(n, -1)
        lock = self.box_lock.gather(1, some).view(adj.shape)
        holder = self.box_holder.gather(1, some).view(adj.shape)
        free = (adj >= 0) & (lock == UNLOCKED) & (holder < 0) & ~self._ungrabbable(adj, pos)
        toggle = free | ((adj >= 0) & (lock == self.team_t[idx][..., None]))

        def first(ok: Tensor) -> Tensor:
            pick = adj.gather(2, ok.to(torch.uint8).argmax(2, keepdim=True))[..., 0]
            return torch.where(ok.any(2), pick, -1).view(agent.shape)

        return first(free), first(toggle)

    def _ungrabbable(self, adj: Tensor, pos: Tensor) -> Tensor:
        """Adjacent objects ``adj`` ``(n, m, 4)`` of agents at ``pos`` that v0 lets be grabbed but a
        later version does not (none here)."""
        return torch.zeros_like(adj, dtype=torch.bool)

    def _grab(self, agent: Tensor, act: Tensor) -> None:
        """Release the held box, or grab the first free adjacent one."""
        sel = act == GRAB
        box = self._row(self.holding, agent)
        let_go = sel & (box >= 0)
        none = torch.full_like(agent, -1)
        self._put(self.box_holder, box, none, let_go)
        self._put(self.holding, agent, none, let_go)
        target, _ = self._targets(agent)
        ok = sel & ~let_go & (target >= 0)
        self._put(self.holding, agent, target, ok)
        self._put(self.box_holder, target, agent, ok)

    def _lock(self, agent: Tensor, act: Tensor) -> None:
        """Lock the held box (releasing it), else toggle the first adjacent one this team may."""
        held = self._row(self.holding, agent)
        _, adjacent = self._targets(agent)
        box = torch.where(held >= 0, held, adjacent)
        ok = (act == LOCK) & (box >= 0)
        none = torch.full_like(agent, -1)
        self._put(self.box_holder, held, none, ok & (held >= 0))
        self._put(self.holding, agent, none, ok)
        unlocked = self._row(self.box_lock, box) == UNLOCKED
        self._put(self.box_lock, box, torch.where(unlocked, self.team_t[agent], UNLOCKED), ok)
