"""The one PPO core both trainers use: masked sampling, GAE, rollouts, the clipped update."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch
from torch import nn

from agents.checkpoint import load_optimizer_tensors, optimizer_tensors
from agents.nets import build_net
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPOConfig
from agents.trainers.ppo_core import (
    FlatAdam,
    LogitsCategorical,
    PPOSettings,
    Rollout,
    Samples,
    bf16_matmul_units,
    gae,
    masked_logits,
    masked_sample,
    matmul_dtype,
    ppo_update,
    resolve_precision,
    take_rows,
)
from agents.trainers.ppo_selfplay import PPOConfig


def test_masked_sampling_never_picks_an_illegal_action() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4000, 7, generator=gen) * 5
    mask = torch.rand(4000, 7, generator=gen) < 0.4
    mask[:, 3] = True
    act, logp = masked_sample(logits, mask, gen)
    assert mask[torch.arange(4000), act].all() and (logp <= 0).all()
    legal = torch.log_softmax(logits.masked_fill(~mask, -1e9), -1)
    assert torch.allclose(logp, legal[torch.arange(4000), act])


def test_unchecked_sampling_draws_what_multinomial_draws() -> None:
    """``checked=False`` skips torch.multinomial's checks, not its draw: the same actions, the same
    log-probabilities and the same random stream left behind."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3000, 7, generator=gen) * 3
    mask = torch.rand(3000, 7, generator=gen) < 0.5
    mask[:, 0] = True
    draws = {}
    for checked in (True, False):
        g = torch.Generator().manual_seed(7)
        act, logp = masked_sample(logits, mask, g, checked=checked)
        draws[checked] = act, logp, torch.rand(3, generator=g)
    assert all(torch.equal(a, b) for a, b in zip(draws[True], draws[False], strict=True))
    assert mask[torch.arange(3000), draws[False][0]].all() and len(set(draws[False][0].tolist())) == 7


def test_gae_with_episodes_ending_at_the_rollout_end_is_the_one_with_a_final_done() -> None:
    gen = torch.Generator().manual_seed(1)
    rew, val = torch.randn(12, 5, 2, generator=gen), torch.randn(12, 5, 2, generator=gen)
    done = torch.zeros(12, 5, 2)
    done[-1] = 1.0
    whole = gae(rew, val, None, None, 0.99, 0.95)
    assert torch.equal(whole, gae(rew, val, done, torch.randn(5, 2, generator=gen), 0.99, 0.95))
    # By hand: the last step's advantage is its reward minus its value.
    assert torch.allclose(whole[-1], rew[-1] - val[-1])
    assert torch.allclose(whole[-2], rew[-2] + 0.99 * val[-1] - val[-2] + 0.99 * 0.95 * whole[-1])


def test_a_rollout_flattens_to_one_sample_per_decision_it_keeps() -> None:
    gen = torch.Generator().manual_seed(2)
    steps, envs, agents, dim = 6, 4, 2, 3  # hide-and-seek's shape: (steps, envs, team agents, ...)
    obs = torch.randn(steps, envs, agents, dim, generator=gen)
    mask = torch.rand(steps, envs, agents, 7, generator=gen) < 0.5
    act = torch.randint(0, 7, (steps, envs, agents), generator=gen)
    logp, val, rew = (torch.randn(steps, envs, agents, generator=gen) for _ in range(3))
    roll = Rollout(obs, mask, act, logp, val, rew)
    adv = gae(rew, val, None, None, 0.9, 0.8)
    every = roll.samples(0.9, 0.8)
    assert every.obs.shape == (steps * envs * agents, dim) and every.mask.shape == (steps * envs * agents, 7)
    assert torch.equal(every.obs[5], obs[0, 2, 1]) and torch.equal(every.act[5], act[0, 2, 1])
    assert torch.equal(every.adv, adv.flatten()) and torch.equal(every.ret, (adv + val).flatten())
    live = torch.tensor([True, False, True, False])  # the envs where this team learns
    kept = roll.samples(0.9, 0.8, keep=live[None, :, None])
    assert len(kept.act) == steps * 2 * agents
    assert torch.equal(kept.obs, obs[:, live].flatten(0, 2)) and torch.equal(kept.adv, adv[:, live].flatten())
    # Boards, bootstrapped: done and next_value reach GAE.
    done, nxt = (torch.rand(steps, envs, generator=gen) < 0.3).float(), torch.randn(envs, generator=gen)
    boards = Rollout(obs[:, :, 0], mask[:, :, 0], act[:, :, 0], logp[:, :, 0], val[:, :, 0], rew[:, :, 0], done, nxt)
    assert torch.equal(boards.samples(0.9, 0.8).adv, gae(rew[:, :, 0], val[:, :, 0], done, nxt, 0.9, 0.8).flatten())


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(3, 4)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor):
        out = self.net(obs)
        return torch.distributions.Categorical(logits=out.masked_fill(~mask, -1e9)), out[:, 0]


def test_the_update_steps_once_per_minibatch_of_every_pass() -> None:
    torch.manual_seed(0)
    model = _Model()
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    n = 103
    samples = Samples(torch.randn(n, 3), torch.ones(n, 4, dtype=torch.bool), torch.randint(0, 4, (n,)),
                      torch.full((n,), -1.4), torch.randn(n), torch.randn(n))
    settings = PPOSettings(epochs=3, minibatches=5)
    before = [p.detach().clone() for p in model.parameters()]
    losses = ppo_update(model, optim, samples, settings, torch.Generator().manual_seed(2))
    assert optim.state[next(model.parameters())]["step"] == 15 and all(map(torch.isfinite, map(torch.tensor, losses)))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_the_flat_step_is_clip_grad_norm_and_adams_and_saves_and_loads_as_adam() -> None:
    """:class:`FlatAdam` (``ppo_update(flat=True)``) moves the weights as ``clip_grad_norm_`` and
    ``Adam.step`` do, keeps the optimiser's state where saving reads it (the same tensors, names
    and shapes), and a state loaded into a fresh optimiser continues the same way."""
    n = 90
    samples = Samples(torch.randn(n, 3), torch.ones(n, 4, dtype=torch.bool), torch.randint(0, 4, (n,)),
                      torch.full((n,), -1.4), torch.randn(n) * 5, torch.randn(n) * 5)
    settings = PPOSettings(epochs=3, minibatches=4, max_grad_norm=0.1)  # the clip bites
    runs = {}
    for flat in (False, True):
        torch.manual_seed(1)
        model = _Model()
        optim = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-5, fused=True)
        ppo_update(model, optim, samples, settings, torch.Generator().manual_seed(2), flat=flat)
        runs[flat] = model, optim
    (ref, ref_optim), (model, optim) = runs[False], runs[True]
    for a, b in zip(ref.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    saved, expected = optimizer_tensors(optim), optimizer_tensors(ref_optim)
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in expected.items()}
    for k in expected:
        torch.testing.assert_close(saved[k], expected[k], rtol=1e-4, atol=1e-7)
    # resume: a fresh model and Adam loaded from the saved tensors continue as the original
    torch.manual_seed(5)
    again = _Model()
    again.load_state_dict(model.state_dict())
    again_optim = torch.optim.Adam(again.parameters(), lr=1e-2, eps=1e-5, fused=True)
    load_optimizer_tensors(again_optim, saved)
    for m, o in ((model, optim), (again, again_optim)):
        ppo_update(m, o, samples, settings, torch.Generator().manual_seed(3), flat=True)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True))
    assert float(optimizer_tensors(again_optim)["optim.0.step"]) == 24
    # only a plain Adam over the model's own parameters is flattened; others take the usual path
    assert FlatAdam.of(again, torch.optim.SGD(again.parameters(), lr=0.1)) is None
    assert FlatAdam.of(again, torch.optim.Adam(again.parameters(), weight_decay=0.1)) is None


def test_both_trainers_name_the_split_alike() -> None:
    shared = set(PPOSettings.__dataclass_fields__)
    for config in (PPOConfig(), HideAndSeekPPOConfig()):
        assert isinstance(config, PPOSettings) and shared <= set(asdict(config))
    assert (PPOConfig.minibatches, HideAndSeekPPOConfig.minibatches) == (4, 6)
    # A config saved before the one name (samples per minibatch) loads as a count.
    old = asdict(HideAndSeekPPOConfig(env_id="hide_and_seek-v1", num_envs=128))
    del old["minibatches"]
    old["minibatch_size"] = 2048
    assert HideAndSeekPPOConfig.from_dict(old).minibatches == 6


def test_take_rows_is_index_select_for_every_layout() -> None:
    """The minibatch gather copies rows of whole 8-byte words as such and everything else as
    ``index_select`` does: the same tensor, dtype and shape in every case, the wide path included."""
    idx = torch.tensor([5, 0, 5, 2])
    cases = [torch.randn(6, 792).bfloat16(), torch.randn(6, 4, 8).bfloat16(),  # 8-byte rows: int64 words
             torch.randn(6, 3).bfloat16(), torch.rand(6, 7) > 0.5, torch.randn(6), torch.randn(6, 2).double(),
             torch.randn(8, 6).bfloat16().t(), torch.randn(0, 8).bfloat16()]
    for x in cases:
        rows = idx if len(x) else idx[:0]
        got, want = take_rows(x, rows), x.index_select(0, rows)
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    wide = torch.randn(6, 792).bfloat16()
    assert take_rows(wide, idx).data_ptr() != wide.data_ptr()  # a copy, not a view of the source


def test_samples_kept_by_rows_update_as_the_copied_ones() -> None:
    """``Rollout.samples(copy=False)`` names the kept rows instead of copying them: the same
    minibatches from the same random stream, so the same weights."""
    torch.manual_seed(0)
    steps, envs = 6, 5
    rollout = Rollout(obs=torch.randn(steps, envs, 3), mask=torch.ones(steps, envs, 4, dtype=torch.bool),
                      act=torch.randint(0, 4, (steps, envs)), logp=torch.full((steps, envs), -1.4),
                      val=torch.randn(steps, envs), rew=torch.randn(steps, envs))
    keep = torch.tensor([True, False, True, True, False])[None, :]
    results = []
    for copy in (True, False):
        torch.manual_seed(1)
        model = _Model()
        optim = torch.optim.Adam(model.parameters(), lr=1e-2)
        samples = rollout.samples(0.9, 0.95, keep=keep, copy=copy)
        assert len(samples) == steps * 3
        ppo_update(model, optim, samples, PPOSettings(epochs=2, minibatches=3), torch.Generator().manual_seed(2))
        results.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_precision_resolves_auto_by_the_cpu_and_refuses_unknown_names() -> None:
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) == "fp32" and resolve_precision("bf16", cpu) == "bf16"
    assert resolve_precision("auto", cpu) == ("bf16" if bf16_matmul_units() else "fp32")
    assert resolve_precision("auto", torch.device("cuda")) == "fp32"  # accelerators keep float32 under auto
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16", cpu)
    with pytest.raises(ValueError, match="precision must be one of"):
        HideAndSeekPPOConfig(precision="half")
    # a config saved before there was a choice trained in float32 and keeps it
    saved = asdict(HideAndSeekPPOConfig())
    del saved["precision"]
    assert HideAndSeekPPOConfig.from_dict(saved).precision == "fp32"


def test_bf16_multiplies_only_the_first_layer_in_bfloat16_and_trains_the_float32_weights() -> None:
    torch.manual_seed(0)
    net = build_net("mlp", {"hidden": [16, 16]}, (40,), 5)
    x = torch.randn(32, 40)
    exact = net(x)
    low = net(x, matmul_dtype(resolve_precision("bf16", torch.device("cpu"))))
    assert low.dtype == torch.float32 and matmul_dtype("fp32") is None
    assert torch.allclose(low, exact, rtol=0.05, atol=0.02) and not torch.equal(low, exact)
    # the first layer's product is bfloat16's: rounding the inputs and weights to bfloat16 by hand gives it
    first = net.trunk[0]
    rounded = nn.functional.linear(x.bfloat16().float(), first.weight.bfloat16().float(), first.bias.bfloat16().float())
    assert torch.allclose(net.features(x, torch.bfloat16), net._act(net.trunk[1](net._act(rounded))), atol=1e-2)
    low.sum().backward()  # gradients reach every float32 weight, the first layer's too
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and p.grad.abs().sum() > 0
               for p in net.parameters())


def test_logits_categorical_gives_torch_categoricals_numbers_and_gradients() -> None:
    torch.manual_seed(1)
    raw = torch.randn(64, 7)
    mask = torch.rand(64, 7) < 0.7
    mask[:, 0] = True
    act = torch.multinomial(mask.float(), 1).squeeze(-1)
    grads, values = [], []
    for make in (LogitsCategorical, lambda logits: torch.distributions.Categorical(logits=logits)):
        x = raw.clone().requires_grad_(True)
        dist = make(masked_logits(x, mask))
        logp, ent = dist.log_prob(act), dist.entropy()
        (logp.sum() + ent.sum()).backward()
        values.append((logp.detach(), ent.detach()))
        grads.append(x.grad)
    (logp, ent), (torch_logp, torch_ent) = values
    assert torch.allclose(logp, torch_logp, atol=1e-6) and torch.allclose(ent, torch_ent, atol=1e-6)
    assert torch.isfinite(grads[0]).all() and torch.allclose(grads[0], grads[1], atol=1e-6)
    assert (grads[0][~mask] == 0).all()  # a masked action gets no gradient
