"""What hide-and-seek agents may do and see, for the torch cores: :class:`TorchPerception`.

Action masks, line of sight and egocentric observations as batched torch gathers: the
tensor versions of ``HideAndSeekCore.action_masks`` / ``visibility`` / ``observe`` and
of :func:`envs.hide_and_seek.layouts.line_of_sight` / ``windows``, value for value.
A mixin over the core's state tensors, so this module needs no core (and the core
imports it, never the other way round).
"""

from __future__ import annotations

import torch
from torch.nn import functional

from envs.hide_and_seek.rules import CHANNELS, FLAT, HIDERS, NOOP, NUM_ACTIONS, SEEKERS

Tensor = torch.Tensor


class TorchPerception:
    """Action masks, sight and observations of a torch hide-and-seek core (a mixin).

    The core provides the state tensors (``agent_pos``, ``box_at``, ``holding``, ...) and
    the move helpers (``_free``, ``_targets``) these read.
    """

    def action_masks(self) -> Tensor:
        """``(n_envs, n_agents, 7)`` bool: actions that would succeed now.

        Other agents do not block moves here (they may move away first); a frozen seeker in
        preparation and every agent of a finished episode may only noop.
        """
        n, a = self.n_envs, self.n_agents
        box = self.holding
        held = box >= 0
        box_pos = torch.where(held[..., None], self.box_pos.gather(
            1, box.clamp(min=0)[..., None].expand(-1, -1, 2)), self.agent_pos)
        new_pos = self.agent_pos[:, :, None] + self._moves
        new_box_pos = box_pos[:, :, None] + self._moves
        moves = self._free(new_pos, -1, box[..., None], False)
        moves &= ~held[..., None] | self._free(new_box_pos, -1, box[..., None], False)
        agents = torch.arange(a, device=self.device).expand(n, -1)
        grab, lock = self._targets(agents)
        # Columns: noop, the four moves, grab (5), lock (6).
        masks = torch.cat([torch.ones((n, a, 1), dtype=torch.bool, device=self.device), moves,
                           (held | (grab >= 0))[..., None], (held | (lock >= 0))[..., None]], 2)
        frozen = (self.team_t == SEEKERS)[None] & (self.t < self.prep_steps)[:, None]
        stuck = frozen | (self.t >= self.max_steps)[:, None]
        keep = torch.arange(NUM_ACTIONS, device=self.device) == NOOP
        return masks & (keep | ~stuck[..., None])


    def visibility(self) -> Tensor:
        """``vis[e, i, j]``: agent ``i`` sees agent ``j`` (within radius, no wall or box between, never itself)."""
        pos = self.agent_pos
        blocks = (self.walls | (self.box_at >= 0)).view(self.n_envs, -1)
        rad = self.vision_radius
        rel = pos[:, None, :, :] - pos[:, :, None, :]  # target minus observer
        idx = rel.clamp(-rad, rad) + rad
        near = (rel.abs() <= rad).all(-1) & self._in_range_t[idx[..., 0], idx[..., 1]]
        cells = pos[:, :, None, None, :] + self._between_t[idx[..., 0], idx[..., 1]]
        cells = cells.clamp(0, self.size - 1)  # far pairs index garbage; masked by near
        flat = (cells[..., 0] * self.size + cells[..., 1]).view(self.n_envs, -1)
        blocked = blocks.gather(1, flat).view(cells.shape[:-1]).any(-1)
        eye = torch.eye(self.n_agents, dtype=torch.bool, device=self.device)
        return near & ~blocked & ~eye


    def windows(self, maps: Tensor, order: Tensor) -> Tensor:
        """``(n, agents, k, v, v)`` windows of ``maps`` ``(n, c, size, size)`` around each agent,
        channels picked per agent by ``order`` ``(agents, k)``.

        Beyond the grid, walls (channel 0) read as True and the other maps as False.
        """
        c = maps.shape[1]
        n, a, v, half = self.n_envs, self.n_agents, self.view_size, self._half
        side = self.size + 2 * half
        padded = functional.pad(maps.to(torch.uint8), (half, half, half, half))
        if half:
            padded[:, 0, :half] = padded[:, 0, -half:] = 1
            padded[:, 0, :, :half] = padded[:, 0, :, -half:] = 1
        pos = self.agent_pos
        flat = (pos[:, :, 0, None, None] + self._win_dy) * side + pos[:, :, 1, None, None] + self._win_dx
        out = padded.view(n, c, -1).gather(2, flat.view(n, 1, -1).expand(-1, c, -1))
        out = out.view(n, c, a, v, v).transpose(1, 2)
        return out.gather(2, order[None, :, :, None, None].expand(n, -1, -1, v, v))


    def observe(self, vis: Tensor | None = None) -> Tensor:
        """Egocentric observations ``(n_envs, n_agents, obs_dim)`` float32 (see the numpy core).

        Written into one preallocated tensor (window planes, then the ``FLAT`` features).
        """
        vis = self.visibility() if vis is None else vis
        n, a, v, half = self.n_envs, self.n_agents, self.view_size, self._half
        # v0's features only (a later version's core appends its own after them).
        out = torch.zeros((n, a, len(CHANNELS) * v * v + len(FLAT)), device=self.device)
        planes = out[..., : len(CHANNELS) * v * v].view(n, a, len(CHANNELS), v * v)
        lock = self.box_lock.gather(1, self.box_at.clamp(min=0).view(n, -1)).view(self.box_at.shape)
        has_box = self.box_at >= 0
        maps = torch.stack([self.walls, has_box, has_box & (lock == HIDERS),
                            has_box & (lock == SEEKERS)], 1)
        planes[:, :, :4] = self.windows(maps, self._order).view(n, a, 4, v * v)
        rel = self.agent_pos[:, None, :, :] - self.agent_pos[:, :, None, :] + half
        inside = ((rel >= 0) & (rel < v)).all(-1)
        same = self.team_t[:, None] == self.team_t[None, :]
        eye = torch.eye(a, dtype=torch.bool, device=self.device)
        cell = (rel[..., 0] * v + rel[..., 1]).clamp(0, v * v - 1)
        # Teammates, then opponents in sight: a one at each one's cell (agents never share one).
        for channel, ok in ((4, inside & same & ~eye), (5, inside & ~same & vis)):
            planes[:, :, channel].scatter_add_(2, cell, ok.to(torch.float32))
        flat = out[..., len(CHANNELS) * v * v:]
        assert flat.shape[-1] == len(FLAT)
        # float64 first, then float32: the numpy core's rounding.
        flat[..., 0] = (self.t < self.prep_steps)[:, None].to(torch.float32)
        flat[..., 1] = (self.t.to(torch.float64) / self.max_steps)[:, None].to(torch.float32)
        flat[..., 2] = (self.team_t == HIDERS).to(torch.float32)
        flat[..., 3] = (self.team_t == SEEKERS).to(torch.float32)
        flat[..., 4] = (self.holding >= 0).to(torch.float32)
        flat[..., 5:] = (self.agent_pos.to(torch.float64) / (self.size - 1)).to(torch.float32)
        return out
