"""Hide-and-seek PPO with a centralized critic (issue 21 item 3): the critic sees the full
state of its episode and the agent's index; the actor, the exported agent, its own view."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from agents.checkpoint import load_checkpoint
from agents.nets import build_net
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig
from arena.training.hide_and_seek.config import default_v1_ppo
from envs.hide_and_seek.rules import NUM_ACTIONS


def tiny(**changes) -> HideAndSeekPPOConfig:
    return replace(default_v1_ppo(seed=3), num_envs=8, hidden=[8], epochs=1, minibatches=2, device="cpu",
                   critic="central", **changes)


def test_a_central_critic_trains_and_the_exported_actor_keeps_its_own_view(tmp_path) -> None:
    torch.set_num_threads(1)
    trainer = HideAndSeekPPO(tiny())
    state_dim = trainer.core.critic_state().shape[-1]
    assert trainer.critic_dim == state_dim + 4
    critic_in = trainer.models["hider"].critic.state_dict()
    first = next(v for k, v in critic_in.items() if k.endswith("weight"))
    assert first.shape[1] == trainer.obs_dim + state_dim + 4
    before = {k: v.clone() for k, v in trainer.models["seeker"].critic.state_dict().items()}
    for _ in range(2):
        stats = trainer.update()
        assert all(np.isfinite(x) for loss in stats.losses.values() for x in loss), stats.losses
    assert any(not torch.equal(before[k], v) for k, v in trainer.models["seeker"].critic.state_dict().items())
    # The exported agent is the registry mlp on the agent's own observation, as with a local critic.
    local = HideAndSeekPPO(replace(tiny(), critic="local"))
    paths = trainer.save_generation(trainer.freeze(), tmp_path)
    loaded = load_checkpoint(paths["hider"])
    assert loaded.spec.arch == "mlp" and loaded.spec.env == "hide_and_seek-v1"
    shapes = {k: v.shape for k, v in local.models["hider"].actor.state_dict().items()}
    assert {k: v.shape for k, v in trainer.generations[-1]["hider"].items()} == shapes
    net = build_net("mlp", {"hidden": [8]}, (trainer.obs_dim,), NUM_ACTIONS)
    net.load_state_dict(trainer.generations[-1]["hider"])


def test_the_torch_core_feeds_the_central_critic_the_same_state() -> None:
    torch.set_num_threads(1)
    host, dev = HideAndSeekPPO(tiny()), HideAndSeekPPO(tiny(torch_core=True))
    assert host.critic_dim == dev.critic_dim
    stats = dev.update()
    assert all(np.isfinite(x) for loss in stats.losses.values() for x in loss)
    obs, _ = host.envs.reset()
    state = host.envs.critic_state()
    rows = host.critic_rows(obs, state, slice(2, 4), torch.full((8, 2, host.obs_dim + host.critic_dim), torch.nan))
    assert torch.equal(rows[..., :host.obs_dim], obs[:, 2:4])
    assert torch.equal(rows[..., host.obs_dim:-4], state[:, None].expand(8, 2, -1))
    assert torch.equal(rows[..., -4:], torch.eye(4)[2:4].expand(8, 2, 4))


def test_a_central_critic_resumes_exactly() -> None:
    torch.set_num_threads(1)
    a = HideAndSeekPPO(tiny())
    a.update()
    tensors, counters, generations = a.state_tensors(), a.counters(), a.generations
    assert any(k.startswith("hider.model.critic.") for k in tensors)
    b = HideAndSeekPPO(tiny())
    b.load_state_tensors(tensors)
    b.load_counters(counters)
    b.load_generations(generations)
    a.update()
    b.update()
    for role in ("hider", "seeker"):
        for (k, x), y in zip(a.models[role].state_dict().items(), b.models[role].state_dict().values()):
            assert torch.equal(x, y), (role, k)


def test_a_config_saved_before_the_critic_choice_keeps_its_local_critic() -> None:
    torch.set_num_threads(1)
    old = HideAndSeekPPO(replace(tiny(), critic="local"))
    saved = asdict(old.cfg)
    del saved["critic"]
    cfg = HideAndSeekPPOConfig.from_dict(saved)
    assert cfg.critic == "local"
    again = HideAndSeekPPO(cfg)
    again.load_state_tensors(old.state_tensors())
    assert again.critic_dim == 0
    with pytest.raises(ValueError, match="critic must be one of"):
        replace(cfg, critic="global")
    with pytest.raises(ValueError, match="gamma"):
        replace(cfg, gamma=1.0)
    assert replace(cfg, gamma=0.998).gamma == 0.998
