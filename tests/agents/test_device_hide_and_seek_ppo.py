"""Hide-and-seek PPO with episodes on the torch core (the GPU path, run here on the CPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TINY = {"num_envs": 32, "hidden": [32, 32], "minibatches": 4, "seed": 3}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout_bank", [0, 8])
def test_device_episodes_train_both_teams_and_freeze_cpu_generations(device: str,
                                                                      layout_bank: int) -> None:
    cfg = HideAndSeekPPOConfig(**TINY, device=device, torch_core=True, layout_bank=layout_bank,
                               past_opponent_share=0.5)
    trainer = HideAndSeekPPO(cfg)
    assert trainer.core.device.type == torch.device(device).type
    before = {k: v.clone() for k, v in trainer.models["seeker"].actor.state_dict().items()}
    for _ in range(2):
        stats = trainer.update()
        assert stats.env_steps == 32 * 60
        assert all(math.isfinite(x) for losses in stats.losses.values() for x in losses)
        assert 0.0 <= stats.door_block_rate <= 1.0 and -36 <= stats.hider_return <= 36
        trainer.freeze()
    after = trainer.models["seeker"].actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in after)  # it learned something
    assert all(v.device.type == "cpu" for g in trainer.generations for sd in g.values()
               for v in sd.values())


def test_device_and_host_episodes_start_from_the_same_layouts() -> None:
    """Without a layout bank both paths draw v0 layouts from the same seed stream."""
    host = HideAndSeekPPO(HideAndSeekPPOConfig(**TINY))
    dev = HideAndSeekPPO(HideAndSeekPPOConfig(**TINY, torch_core=True))
    obs_host, mask_host = host.envs.reset()
    obs_dev, mask_dev = dev.envs.reset()
    assert np.array_equal(obs_host.numpy(), obs_dev.numpy())
    assert np.array_equal(mask_host.numpy(), mask_dev.numpy())
