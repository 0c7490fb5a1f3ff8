"""Where hide-and-seek PPO's episodes run: the numpy core on the host, or the torch core on a device.

:class:`agents.trainers.ppo_hide_and_seek.HideAndSeekPPO` plays its episodes through one
of these two with the same tensor interface (``reset``, ``step``, ``door_block_rate``):

* :class:`HostEpisodes` - :class:`envs.hide_and_seek_core.HideAndSeekCore` (numpy), the
  CPU default; observations cross into torch once per step.
* :class:`DeviceEpisodes` - :class:`envs.device.hide_and_seek.TorchHideAndSeekCore` on
  the model's device: a whole episode steps there with no host round trip. Layouts are
  v0's, drawn on the host once per update, or picked on the device from a
  :class:`~envs.device.hide_and_seek.LayoutBank` drawn once (``layout_bank``).
"""

from __future__ import annotations

import numpy as np
import torch

from envs.device.hide_and_seek import TorchHideAndSeekCore
from envs.hide_and_seek_core import HideAndSeekCore


class HostEpisodes:
    """``n`` episodes in a numpy core (``core``, default v0's); layouts from ``rng``.

    Tensors cross to ``device`` (default: stay on the CPU) once per step, so a model on a
    GPU can drive a numpy core (``hide_and_seek-v1`` has no torch core yet).
    """

    def __init__(self, n: int, rng: np.random.Generator, core: HideAndSeekCore | None = None,
                 device: torch.device | None = None, **layout) -> None:
        self.core, self.rng, self.n = core or HideAndSeekCore(n, **layout), rng, n
        self.device = device or torch.device("cpu")

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        """New episodes everywhere: observations ``(n, agents, obs_dim)`` and masks."""
        obs, mask = self.core.reset(self.rng.integers(0, 2**31, size=self.n))
        return self._to(obs), self._to(mask)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step: observations, per-agent rewards, masks."""
        obs, rewards, _, mask = self.core.step(actions.cpu().numpy())
        return self._to(obs), self._to(rewards), self._to(mask)

    def _to(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device)

    def door_block_rate(self) -> float:
        """Share of episodes whose doors all held a box when preparation ended."""
        return float(self.core.door_block_status(locked=False).mean())


class DeviceEpisodes:
    """``n`` episodes in the torch core on ``device``.

    Args:
        n: Episodes.
        device: Where they run.
        layout_bank: 0: every reset draws fresh v0 layouts from ``rng`` on the host;
            ``k``: ``k`` layouts are drawn once and each reset picks among them on the device.
        rng: The trainer's layout stream.
    """

    def __init__(self, n: int, device: torch.device, layout_bank: int, rng: np.random.Generator,
                 **layout) -> None:
        self.core, self.rng, self.n = TorchHideAndSeekCore(n, device=device, **layout), rng, n
        self.bank = None
        if layout_bank > 0:
            self.bank = self.core.draw_layouts(rng.integers(0, 2**31, size=layout_bank))
            self.gen = torch.Generator(device).manual_seed(int(rng.integers(2**31)))

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.bank is None:
            return self.core.reset(self.rng.integers(0, 2**31, size=self.n))
        picks = torch.randint(0, len(self.bank), (self.n,), generator=self.gen,
                              device=self.core.device)
        return self.core.reset_from_bank(self.bank, picks)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        obs, rewards, _, mask = self.core.step(actions)
        return obs, rewards, mask

    def door_block_rate(self) -> float:
        return float(self.core.door_block_status(locked=False).float().mean())
