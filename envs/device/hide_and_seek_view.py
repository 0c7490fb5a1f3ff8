"""What hide-and-seek agents may do and see, for :class:`~envs.device.hide_and_seek.TorchHideAndSeekCore`.

Action masks, line of sight and egocentric observations as batched torch gathers: the
tensor versions of ``HideAndSeekCore.action_masks`` / ``visibility`` / ``observe`` and
of :func:`envs.hide_and_seek_grid.line_of_sight` / ``windows``, value for value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.nn import functional

from envs.hide_and_seek_core import CHANNELS, FLAT, NOOP, NUM_ACTIONS
from envs.hide_and_seek_grid import HIDERS, SEEKERS

if TYPE_CHECKING:
    from envs.device.hide_and_seek import TorchHideAndSeekCore

Tensor = torch.Tensor


def action_masks(core: TorchHideAndSeekCore) -> Tensor:
    """``(n_envs, n_agents, 7)`` bool: actions that would succeed now.

    Other agents do not block moves here (they may move away first); a frozen seeker in
    preparation and every agent of a finished episode may only noop.
    """
    n, a = core.n_envs, core.n_agents
    box = core.holding
    held = box >= 0
    box_pos = torch.where(held[..., None], core.box_pos.gather(
        1, box.clamp(min=0)[..., None].expand(-1, -1, 2)), core.agent_pos)
    new_pos = core.agent_pos[:, :, None] + core._moves
    new_box_pos = box_pos[:, :, None] + core._moves
    moves = core._free(new_pos, -1, box[..., None], False)
    moves &= ~held[..., None] | core._free(new_box_pos, -1, box[..., None], False)
    agents = torch.arange(a, device=core.device).expand(n, -1)
    grab, lock = core._targets(agents)
    # Columns: noop, the four moves, grab (5), lock (6).
    masks = torch.cat([torch.ones((n, a, 1), dtype=torch.bool, device=core.device), moves,
                       (held | (grab >= 0))[..., None], (held | (lock >= 0))[..., None]], 2)
    frozen = (core.team_t == SEEKERS)[None] & (core.t < core.prep_steps)[:, None]
    stuck = frozen | (core.t >= core.max_steps)[:, None]
    keep = torch.arange(NUM_ACTIONS, device=core.device) == NOOP
    return masks & (keep | ~stuck[..., None])


def visibility(core: TorchHideAndSeekCore) -> Tensor:
    """``vis[e, i, j]``: agent ``i`` sees agent ``j`` (within radius, no wall or box between, never itself)."""
    pos = core.agent_pos
    blocks = (core.walls | (core.box_at >= 0)).view(core.n_envs, -1)
    rad = core.vision_radius
    rel = pos[:, None, :, :] - pos[:, :, None, :]  # target minus observer
    idx = rel.clamp(-rad, rad) + rad
    near = (rel.abs() <= rad).all(-1) & core._in_range_t[idx[..., 0], idx[..., 1]]
    cells = pos[:, :, None, None, :] + core._between_t[idx[..., 0], idx[..., 1]]
    cells = cells.clamp(0, core.size - 1)  # far pairs index garbage; masked by near
    flat = (cells[..., 0] * core.size + cells[..., 1]).view(core.n_envs, -1)
    blocked = blocks.gather(1, flat).view(cells.shape[:-1]).any(-1)
    eye = torch.eye(core.n_agents, dtype=torch.bool, device=core.device)
    return near & ~blocked & ~eye


def windows(core: TorchHideAndSeekCore, maps: Tensor, order: Tensor) -> Tensor:
    """``(n, agents, k, v, v)`` windows of ``maps`` ``(n, c, size, size)`` around each agent,
    channels picked per agent by ``order`` ``(agents, k)``.

    Beyond the grid, walls (channel 0) read as True and the other maps as False.
    """
    c = maps.shape[1]
    n, a, v, half = core.n_envs, core.n_agents, core.view_size, core._half
    side = core.size + 2 * half
    padded = functional.pad(maps.to(torch.uint8), (half, half, half, half))
    if half:
        padded[:, 0, :half] = padded[:, 0, -half:] = 1
        padded[:, 0, :, :half] = padded[:, 0, :, -half:] = 1
    pos = core.agent_pos
    flat = (pos[:, :, 0, None, None] + core._win_dy) * side + pos[:, :, 1, None, None] + core._win_dx
    out = padded.view(n, c, -1).gather(2, flat.view(n, 1, -1).expand(-1, c, -1))
    out = out.view(n, c, a, v, v).transpose(1, 2)
    return out.gather(2, order[None, :, :, None, None].expand(n, -1, -1, v, v))


def observe(core: TorchHideAndSeekCore, vis: Tensor) -> Tensor:
    """Egocentric observations ``(n_envs, n_agents, obs_dim)`` float32 (see the numpy core).

    Written into one preallocated tensor (window planes, then the ``FLAT`` features).
    """
    n, a, v, half = core.n_envs, core.n_agents, core.view_size, core._half
    # v0's features only (a later version's core appends its own after them).
    out = torch.zeros((n, a, len(CHANNELS) * v * v + len(FLAT)), device=core.device)
    planes = out[..., : len(CHANNELS) * v * v].view(n, a, len(CHANNELS), v * v)
    lock = core.box_lock.gather(1, core.box_at.clamp(min=0).view(n, -1)).view(core.box_at.shape)
    has_box = core.box_at >= 0
    maps = torch.stack([core.walls, has_box, has_box & (lock == HIDERS),
                        has_box & (lock == SEEKERS)], 1)
    planes[:, :, :4] = windows(core, maps, core._order).view(n, a, 4, v * v)
    rel = core.agent_pos[:, None, :, :] - core.agent_pos[:, :, None, :] + half
    inside = ((rel >= 0) & (rel < v)).all(-1)
    same = core.team_t[:, None] == core.team_t[None, :]
    eye = torch.eye(a, dtype=torch.bool, device=core.device)
    cell = (rel[..., 0] * v + rel[..., 1]).clamp(0, v * v - 1)
    # Teammates, then opponents in sight: a one at each one's cell (agents never share one).
    for channel, ok in ((4, inside & same & ~eye), (5, inside & ~same & vis)):
        planes[:, :, channel].scatter_add_(2, cell, ok.to(torch.float32))
    flat = out[..., len(CHANNELS) * v * v:]
    assert flat.shape[-1] == len(FLAT)
    # float64 first, then float32: the numpy core's rounding.
    flat[..., 0] = (core.t < core.prep_steps)[:, None].to(torch.float32)
    flat[..., 1] = (core.t.to(torch.float64) / core.max_steps)[:, None].to(torch.float32)
    flat[..., 2] = (core.team_t == HIDERS).to(torch.float32)
    flat[..., 3] = (core.team_t == SEEKERS).to(torch.float32)
    flat[..., 4] = (core.holding >= 0).to(torch.float32)
    flat[..., 5:] = (core.agent_pos.to(torch.float64) / (core.size - 1)).to(torch.float32)
    return out
