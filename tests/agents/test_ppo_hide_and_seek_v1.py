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


def _autograd_grads(model, obs, mask, act, old_logp, adv, ret, s) -> dict[str, torch.Tensor]:
    """``ppo_update``'s loss of one minibatch through autograd: every parameter's gradient."""
    dist, value = model(obs, mask)
    ratio = (dist.log_prob(act) - old_logp).exp()
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - s.clip, 1 + s.clip)).mean()
    loss = pg + s.vf_coef * 0.5 * ((value - ret) ** 2).mean() - s.ent_coef * dist.entropy().mean()
    model.zero_grad()
    loss.backward()
    return {k: p.grad.clone() for k, p in model.named_parameters()}


def test_the_team_models_gradients_by_hand_are_autograds() -> None:
    """``TeamModel.ppo_grads`` (the lean loop's backward) writes the gradients autograd gives for
    the same loss: float32 to rounding, bfloat16 first layers to bfloat16's rounding; ratios spread
    beyond the clip range (both branches of the surrogate taken) and masked actions."""
    torch.set_num_threads(1)
    for precision, tol in (("fp32", 1e-6), ("bf16", 2e-3)):
        cfg = replace(default_v1_ppo(seed=3), num_envs=16, device="cpu", precision=precision)
        trainer = HideAndSeekPPO(cfg)
        samples = trainer._rollout()[0]["hider"].samples(cfg.gamma, cfg.gae_lambda)
        gen = torch.Generator().manual_seed(0)
        rows = torch.randperm(len(samples), generator=gen)[:400]
        obs, mask, act, old, adv, ret = (x[rows] for x in (samples.obs, samples.mask, samples.act, samples.logp,
                                                             samples.adv, samples.ret))
        old = old + 0.3 * torch.randn(len(rows), generator=gen)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        model = trainer.models["hider"]
        expected = _autograd_grads(model, obs, mask, act, old, adv, ret, cfg)
        ratio = (model(obs, mask)[0].log_prob(act) - old).exp()
        assert ((ratio - 1).abs() > cfg.clip).float().mean() > 0.2 and not mask.all()
        for p in model.parameters():
            p.grad = torch.full_like(p, float("nan"))
        terms = model.ppo_grads(obs, mask, act, old, adv, ret, cfg)
        assert all(torch.isfinite(t) for t in terms)
        for name, p in model.named_parameters():
            scale = expected[name].abs().max()
            assert scale > 0 and (p.grad - expected[name]).abs().max() <= tol * scale, (precision, name)


def test_the_lean_loop_plays_and_learns_as_the_classic_one_and_resumes() -> None:
    """``lean_loop`` changes the calls, not the learning: from the same seed the lean and the
    classic loop draw the same actions and end an update with the same weights (float32, up to
    rounding); its saved tensors have the same names and shapes, and a trainer loaded from them
    continues exactly as the one that saved them."""
    torch.set_num_threads(1)
    cfg = replace(default_v1_ppo(seed=6), num_envs=16, hidden=[16], epochs=2, minibatches=2, device="cpu",
                  precision="fp32")
    runs = {}
    for lean in (False, True):
        trainer = HideAndSeekPPO(replace(cfg, lean_loop=lean))
        torch.manual_seed(0)
        first = trainer._rollout()[0]
        buf = {role: {k: getattr(b, k).clone() for k in ("obs", "act", "logp")} for role, b in first.items()}
        trainer.update()  # the lean loop writes its rollout into the last one's tensors; the classic one anew
        assert (trainer._buffers["hider"].obs is first["hider"].obs) if lean else not trainer._buffers
        runs[lean] = trainer, buf
    (classic, buf_c), (lean, buf_l) = runs[False], runs[True]
    for role in ("hider", "seeker"):
        c, lean_buf = buf_c[role], buf_l[role]
        assert torch.equal(c["act"], lean_buf["act"]) and torch.equal(c["obs"], lean_buf["obs"])
        torch.testing.assert_close(c["logp"], lean_buf["logp"])
        for a, b in zip(classic.models[role].parameters(), lean.models[role].parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    saved, expected = lean.state_tensors(), classic.state_tensors()
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in expected.items()}
    again = HideAndSeekPPO(replace(cfg, lean_loop=True))
    again.load_state_tensors(saved)
    again.load_counters(lean.counters())
    for t in (lean, again):
        t.update()
    for role in ("hider", "seeker"):
        assert all(torch.equal(a, b) for a, b in zip(lean.models[role].parameters(),
                                                     again.models[role].parameters(), strict=True))
