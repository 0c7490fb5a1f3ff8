"""Hide-and-seek PPO on hide_and_seek-v1: the v1 core, shaping, v1 checkpoints."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from agents.checkpoint import load_checkpoint
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, make_core
from arena.training.hide_and_seek.config import default_v1_ppo
from envs.hide_and_seek.core_v1 import HideAndSeekV1Core
from envs.hide_and_seek.device.core_v1 import TorchHideAndSeekV1Core


def test_v1_trainer_updates_with_shaping_and_saves_v1_checkpoints(tmp_path) -> None:
    torch.set_num_threads(1)
    cfg = replace(default_v1_ppo(seed=4, shaped=True), num_envs=16, hidden=[16], epochs=1, device="cpu")
    trainer = HideAndSeekPPO(cfg)
    assert isinstance(trainer.core, HideAndSeekV1Core) and trainer.obs_dim == 575
    before = [p.clone() for p in trainer.models["hider"].parameters()]
    stats = trainer.update()
    assert stats.env_steps == 16 * 50 and np.isfinite(stats.hider_return)
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.models["hider"].parameters()))
    paths = trainer.save_generation(trainer.freeze(), tmp_path)
    loaded = load_checkpoint(paths["seeker"])
    assert loaded.spec.env == "hide_and_seek-v1" and loaded.spec.role == "seeker"
    assert make_core(cfg, 2, standard=True).layout == "quadrant"


def test_fort_shaping_pays_hiders_for_boxes_moved_towards_the_doors() -> None:
    cfg = replace(default_v1_ppo(seed=0), num_envs=4, hidden=[8], device="cpu", fort_potential_bonus=10.0,
                  fort_bonus=0.0,
                  ramp_defense_bonus=0.0, ramp_use_bonus=0.0)
    trainer = HideAndSeekPPO(cfg)
    core = trainer.core
    core.reset([0, 1, 2, 3])
    shaping = trainer.shaping
    shaping.start(torch.device("cpu"))
    shaping.potential = shaping.potential - 0.1  # as if the boxes had just come 0.1 nearer
    zero = torch.zeros(4)
    hider, seeker = shaping.rewards(0, zero, zero)
    assert torch.allclose(hider, torch.full((4,), 1.0, dtype=hider.dtype)) and torch.equal(seeker, zero)


def test_v1_trainer_steps_the_torch_core_off_the_host_with_the_same_shaping() -> None:
    torch.set_num_threads(1)
    cfg = replace(default_v1_ppo(seed=2, shaped=True), num_envs=8, hidden=[8], epochs=1, device="cpu",
                  ramp_use_bonus=3.0)
    host, dev = HideAndSeekPPO(cfg), HideAndSeekPPO(replace(cfg, torch_core=True, layout_bank=16))
    assert isinstance(dev.core, TorchHideAndSeekV1Core) and dev.obs_dim == host.obs_dim
    stats = dev.update()
    assert stats.env_steps == 8 * 50 and np.isfinite(stats.hider_return)
    bank = dev.envs.bank
    dev.core.box_by_door = 0.5  # a curriculum changed the shares: the bank is drawn again
    dev.update()
    assert dev.envs.bank is not bank and dev.envs.bank_curriculum[0] == 0.5
    # The same layouts in both cores give the same shaping, numpy arrays or device tensors.
    seeds = list(range(8))
    host.core.reset(seeds)
    dev.core.reset(seeds)
    for trainer in (host, dev):
        trainer.shaping.start(torch.device("cpu"))
        trainer.shaping.potential = trainer.shaping.potential - 0.05
    zero = torch.zeros(8)
    last = host.core.prep_steps - 1
    a = host.shaping.rewards(last, zero, zero)
    b = dev.shaping.rewards(last, zero, zero)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[0].abs().sum() > 0


def test_a_bf16_update_moves_the_weights_as_the_float32_one_and_keeps_float32_state() -> None:
    """bfloat16 matrix products change the numbers a little, not where the update goes: from the
    same start and seed, one update's weight change points the same way as float32's."""
    torch.set_num_threads(1)
    cfg = replace(default_v1_ppo(seed=5), num_envs=16, hidden=[16], epochs=1, minibatches=2, device="cpu")
    runs = {}
    for precision in ("fp32", "bf16"):
        trainer = HideAndSeekPPO(replace(cfg, precision=precision))
        assert trainer.precision == precision
        start = [p.detach().clone() for p in trainer.models["hider"].parameters()]
        stats = trainer.update()
        assert np.isfinite(stats.hider_return) and all(np.isfinite(v).all() for v in stats.losses.values())
        params = list(trainer.models["hider"].parameters())
        assert all(p.dtype == torch.float32 for p in params)  # weights (and so Adam's moments) stay float32
        assert all(v.dtype == torch.float32 for v in trainer.optims["hider"].state_dict()["state"][0].values()
                   if v.dim())
        runs[precision] = torch.cat([(p.detach() - s).flatten() for p, s in zip(params, start, strict=True)])
        frozen = trainer.generations[trainer.freeze()]["hider"]  # what becomes the exported agent
        assert all(v.dtype == torch.float32 for v in frozen.values())
    fp32, bf16 = runs["fp32"], runs["bf16"]
    assert not torch.equal(fp32, bf16)  # bf16 did run in bfloat16
    assert torch.nn.functional.cosine_similarity(fp32, bf16, dim=0) > 0.99  # 0.9995 measured; bf16 logits gave 0.988
