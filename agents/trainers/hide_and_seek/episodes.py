"""Where hide-and-seek PPO's episodes run: the numpy core on the host, or the torch core on a device.

:class:`agents.trainers.hide_and_seek.ppo.HideAndSeekPPO` plays its episodes through one
of these two with the same tensor interface (``reset``, ``step``, ``critic_state``, ``door_blocked``):

* :class:`HostEpisodes` - :class:`envs.hide_and_seek.core.HideAndSeekCore` (numpy), the
  CPU default; observations cross into torch once per step.
* :class:`DeviceEpisodes` - :class:`envs.hide_and_seek.device.core.TorchHideAndSeekCore` (or
  v1's :class:`envs.hide_and_seek.device.core_v1.TorchHideAndSeekV1Core`) on the model's device:
  a whole episode steps there with no host round trip. Layouts are drawn on the host once
  per update, or picked on the device from a :class:`~envs.hide_and_seek.device.core.LayoutBank`
  (``layout_bank``), drawn again whenever a curriculum changes the core's layout shares.

After an episode both give its phase detectors (``phases``, v1) and which episodes started
with a curriculum stage (``stages``: drawn from the layout seeds, as the cores draw them), so
a league can read the phase rates of the training episodes that started as the standard
layout (:class:`TrainingEpisodes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.curriculum import ATTRIBUTES, drawn_share
from envs.hide_and_seek.device.core import TorchHideAndSeekCore

CURRICULUM = ATTRIBUTES  # core attributes a curriculum may change between updates


def hider_points(hider_score: np.ndarray) -> np.ndarray:
    """The hiders' points per episode from their summed team reward: 1 a win, 1/2 a draw, 0 a loss
    (the seekers get 1 minus it)."""
    return (np.sign(hider_score) + 1.0) / 2.0


@dataclass(frozen=True)
class TrainingEpisodes:
    """What one update's episodes showed, one entry per env (host arrays).

    Attributes:
        phases: The core's phase detectors at the episodes' end (v1; empty for v0).
        hider_score: Summed hider team reward per episode (> 0: the hiders won).
        door_blocked: Every door held a box when preparation ended.
        boxes, ramps: The episode started with boxes by the doors / the ramp by a door (the
            curriculum's stages); ``None`` when unknown (layouts picked from a device bank).
        plan: The trainer's opponent plan: per opponent role, ``(envs, past generation)`` or
            ``None`` (every other env was self-play of the learners).
        exploiters: Per role, the envs where each of its exploiters played it.
    """

    phases: dict[str, np.ndarray]
    hider_score: np.ndarray
    door_blocked: np.ndarray
    boxes: np.ndarray | None
    ramps: np.ndarray | None
    plan: dict[str, tuple[slice, int | str] | None]
    exploiters: dict[str, list[slice]] = field(default_factory=dict)

    def self_play(self) -> np.ndarray:
        """``(n,)`` the envs where both learning teams played (no past generation, no exploiter)."""
        mine = np.ones(len(self.hider_score), dtype=bool)
        for entry in self.plan.values():
            if entry is not None:
                mine[entry[0]] = False
        for blocks in self.exploiters.values():
            for rows in blocks:
                mine[rows] = False
        return mine

    def exploiter_scores(self) -> dict[str, list[tuple[float, float]]]:
        """Per role, each exploiter's score against the other role's main in these episodes (a
        win 1, a draw 1/2), beside the score of its own role's main in the self-play episodes
        (hide-and-seek is not symmetric: untrained seekers win most games, so an exploiter is
        judged against what its main does)."""
        hider = hider_points(self.hider_score)
        main = float(hider[self.self_play()].mean())

        def score(role: str, rows) -> float:
            return float(hider[rows].mean()) if role == "hider" else 1.0 - float(hider[rows].mean())

        return {role: [(score(role, rows), main if role == "hider" else 1.0 - main) for rows in blocks]
                for role, blocks in self.exploiters.items()}


def stages(core, seeds: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Which of the episodes reset from ``seeds`` drew each curriculum stage, as the core draws
    them (:func:`envs.hide_and_seek.curriculum.drawn_share`, streams 3 and 4)."""
    if seeds is None:
        return None, None
    boxes, ramps = getattr(core, "box_by_door", False), getattr(core, "ramp_by_door", False)
    return (np.array([drawn_share(boxes, s, 3) for s in seeds], dtype=bool),
            np.array([drawn_share(ramps, s, 4) for s in seeds], dtype=bool))


def host_phases(core) -> dict[str, np.ndarray]:
    """The core's phase detectors as host arrays (``{}`` for a v0 core)."""
    if not hasattr(core, "phases"):
        return {}
    return {k: np.asarray(v.cpu() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
            for k, v in core.phases().items()}


class HostEpisodes:
    """``n`` episodes in a numpy ``core`` of ``n`` envs; layouts from ``rng``.

    Tensors cross to ``device`` (default: stay on the CPU) once per step, so a model on a
    GPU can drive a numpy core.
    """

    def __init__(self, n: int, rng: np.random.Generator, core: HideAndSeekCore,
                 device: torch.device | None = None) -> None:
        self.core, self.rng, self.n = core, rng, n
        self.device = device or torch.device("cpu")
        self.seeds: np.ndarray | None = None
        """the layout seeds of the last reset"""

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        """New episodes everywhere: observations ``(n, agents, obs_dim)`` and masks."""
        self.seeds = self.rng.integers(0, 2**31, size=self.n)
        obs, mask = self.core.reset(self.seeds)
        return self._to(obs), self._to(mask)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step: observations, per-agent rewards, masks."""
        obs, rewards, _, mask = self.core.step(actions.cpu().numpy())
        return self._to(obs), self._to(rewards), self._to(mask)

    def critic_state(self) -> torch.Tensor:
        """The core's full state for a centralized critic, ``(n, d)`` float32, on ``device``."""
        return self._to(self.core.critic_state())

    def _to(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device)

    def door_blocked(self) -> np.ndarray:
        """``(n,)`` the episodes whose doors all held a box when preparation ended."""
        return self.core.door_block_status(locked=False).copy()


class DeviceEpisodes:
    """``n`` episodes in a torch core on ``device``.

    Args:
        n: Episodes.
        device: Where they run.
        layout_bank: 0: every reset draws fresh layouts from ``rng`` on the host;
            ``k``: ``k`` layouts are drawn and each reset picks among them on the device
            (drawn again when the core's :data:`CURRICULUM` attributes change).
        rng: The trainer's layout stream.
        core: The torch core of ``n`` envs on ``device``.
    """

    def __init__(self, n: int, device: torch.device, layout_bank: int, rng: np.random.Generator,
                 core: TorchHideAndSeekCore) -> None:
        self.core, self.rng, self.n = core, rng, n
        self.seeds: np.ndarray | None = None
        """the layout seeds of the last reset (``None`` when picked from the bank)"""
        self.bank_size, self.bank = layout_bank, None
        self.bank_curriculum: tuple | None = None
        """the core's :data:`CURRICULUM` attributes the bank was drawn under"""
        if layout_bank > 0:
            self._draw_bank()
            self.gen = torch.Generator(device).manual_seed(int(rng.integers(2**31)))

    def _draw_bank(self) -> None:
        self.bank = self.core.draw_layouts(self.rng.integers(0, 2**31, size=self.bank_size))
        self.bank_curriculum = self._curriculum()

    def _curriculum(self) -> tuple:
        """The core's :data:`CURRICULUM` attributes now (``None`` where it has none)."""
        return tuple(getattr(self.core, name, None) for name in CURRICULUM)

    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.bank_size == 0:
            self.seeds = self.rng.integers(0, 2**31, size=self.n)
            return self.core.reset(self.seeds)
        if self._curriculum() != self.bank_curriculum:
            self._draw_bank()
        picks = torch.randint(0, len(self.bank), (self.n,), generator=self.gen,
                              device=self.core.device)
        return self.core.reset_from_bank(self.bank, picks)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        obs, rewards, _, mask = self.core.step(actions)
        return obs, rewards, mask

    def critic_state(self) -> torch.Tensor:
        """The core's full state for a centralized critic, ``(n, d)`` float32."""
        return self.core.critic_state()

    def door_blocked(self) -> np.ndarray:
        return self.core.door_block_status(locked=False).cpu().numpy()
