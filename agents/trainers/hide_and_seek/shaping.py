"""Optional reward shaping of hide-and-seek-v1 PPO: bonuses on top of the team reward.

Off by default (:attr:`HideAndSeekPPOConfig.shaped` false: the teams learn from the game's
reward alone). The shaped configuration pays, per episode:

* the hiders ``fort_bonus`` times the share of doors holding a box when preparation ends,
* the hiders ``fort_potential_bonus`` times each preparation step's rise of the core's
  ``fort_potential`` (boxes nearer the doors; potential-based, so it leaves the optimal
  policy alone),
* the hiders ``ramp_defense_bonus`` if every ramp is defended when preparation ends
  (the core's ``ramps_defended``: in the room, or locked off the vault spots),
* the seekers ``ramp_use_bonus`` in the step where ``ramp_use`` first happens.

The detectors are the core's own (numpy arrays on the host, tensors on a device), so
the host and device trainers pay the same.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch


class ShapingConfig(Protocol):
    """The config fields shaping reads."""

    fort_bonus: float
    fort_potential_bonus: float
    ramp_defense_bonus: float
    ramp_use_bonus: float

    @property
    def shaped(self) -> bool: ...


class Shaping:
    """The bonuses of one batch of episodes in ``core`` (a v1 core, numpy or torch).

    Call :meth:`start` after every reset, then :meth:`rewards` after every step.
    """

    def __init__(self, config: ShapingConfig, core: Any) -> None:
        self.cfg, self.core = config, core
        self.active = config.shaped and hasattr(core, "fort_potential")
        """whether any bonus is paid (v1 cores only)"""
        self.potential: torch.Tensor | None = None
        """the core's fort potential after the last step (the potential bonus pays its rise)"""
        self.used: torch.Tensor | None = None
        """``(n,)`` the ramp-use bonus was paid in that episode"""

    def _tensor(self, x, device: torch.device) -> torch.Tensor:
        return torch.as_tensor(x, device=device)

    def start(self, device: torch.device) -> None:
        """New episodes: read the fort potential, nobody has used a ramp yet."""
        if self.active:
            self.potential = self._tensor(self.core.fort_potential(), device)
            self.used = torch.zeros(self.core.n_envs, dtype=torch.bool, device=device)

    def rewards(self, t: int, hider: torch.Tensor, seeker: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Team rewards of step ``t`` (``(n,)`` each) with the bonuses added (new tensors)."""
        if not self.active:
            return hider, seeker
        core, cfg, dev = self.core, self.cfg, hider.device
        hider, seeker = hider.clone(), seeker.clone()
        if t < core.prep_steps:
            potential = self._tensor(core.fort_potential(), dev)
            bonus = cfg.fort_potential_bonus * (potential - self.potential)
            self.potential = potential
            if t + 1 == core.prep_steps:
                bonus = bonus + cfg.fort_bonus * self._tensor(core.door_fraction(), dev)
                bonus = bonus + cfg.ramp_defense_bonus * self._tensor(core.ramps_defended(), dev)
            hider += bonus.to(hider.dtype)
        if cfg.ramp_use_bonus:
            used_now = self._tensor(core.ramp_used, dev)
            seeker += (cfg.ramp_use_bonus * (used_now & ~self.used)).to(seeker.dtype)
            self.used |= used_now
        return hider, seeker
