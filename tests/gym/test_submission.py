"""arena.client.onnx_export: SB3 policies and torch modules become validated ONNX submissions (the examples that train,
export and submit run end to end in tests/examples/test_training_examples.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import arena.gym
from agents.catalog import make_policy
from agents.onnx_agents.probe import probe_observations
from agents.policy import derive_seed
from arena.client.onnx_export import export_submission, logits_module
from arena.engine import MatchJob, play_matches


def test_torch_module_exports_to_a_submission_that_plays(tmp_path):
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Flatten(), nn.Linear(84, 16), nn.Tanh(), nn.Linear(16, 7))
    validated = export_submission(actor, "connect_four-v3", tmp_path / "actor.onnx", name="tiny")
    assert validated.spec.arch == "onnx" and validated.spec.name == "tiny"
    assert (tmp_path / "actor.json").exists()
    policy = make_policy(f"file:{tmp_path / 'actor.onnx'}", "connect_four-v3")
    obs = probe_observations("connect_four-v3", "player", 8).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(policy.logits(obs), actor(torch.as_tensor(obs)).numpy(), atol=1e-5)
    jobs = [MatchJob(derive_seed(0, i), (policy.agent_id, "random")) for i in range(4)]
    opponents = {policy.agent_id: policy, "random": make_policy("random", "connect_four-v3")}
    records = play_matches("connect_four-v3", jobs, opponents)
    assert all(r.forfeit_seat is None for r in records)


def test_unsupported_objects_are_refused():
    with pytest.raises(TypeError, match="Stable-Baselines3"):
        logits_module(object())


@pytest.mark.slow
def test_maskable_ppo_exports_its_actor_logits(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    env = arena.gym.make("tictactoe-v3", opponents=["random"], seed=0)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    export_submission(model, "tictactoe-v3", tmp_path / "ppo")
    policy = make_policy(f"file:{tmp_path / 'ppo.onnx'}", "tictactoe-v3")
    obs = probe_observations("tictactoe-v3", "player", 8).astype(np.float32)
    with torch.no_grad():
        want = model.policy.get_distribution(torch.as_tensor(obs)).distribution.logits.numpy()
    got = torch.log_softmax(torch.as_tensor(policy.logits(obs)), -1).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
