"""Exporting Arena checkpoints to ONNX, and architectures Arena's registry does not have:
the exports validate, give the torch model's logits and play rated-style matches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.catalog import make_policy
from agents.neural import NeuralPolicy, write_checkpoint
from agents.onnx_agents.export import export_module, export_onnx, export_onnx_file, onnx_spec
from agents.onnx_agents.policy import OnnxPolicy, load_onnx_file, validate_onnx_bytes
from arena.engine import MatchJob, play_matches
from envs.errors import InvalidSubmission
from envs.registry import get_spec
from tests.agents.onnx_corpus import spec_json
from tests.agents.onnx_nets import ResidualCNN, TinyTransformer

SETUPS = [  # (env, arch, hparams, role)
    ("connect_four-v3", "cnn", {"channels": [8, 8], "hidden": 32}, None),
    ("simple_tag-v3", "mlp", {"hidden": [32, 32], "activation": "tanh"}, "prey"),
    ("rps-v2", "mlp", {"hidden": [8]}, None),
]


def _observations(obs_shape: tuple[int, ...], k: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(k, *obs_shape)).astype(np.float32)


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[1]}")
def test_export_gives_the_torch_logits(tmp_path: Path, setup) -> None:
    env, arch, hparams, role = setup
    checkpoint = write_checkpoint(tmp_path / "agent", env, arch, hparams, seed=5, role=role)
    torch_policy = NeuralPolicy(checkpoint)
    onnx_policy = OnnxPolicy(validate_onnx_bytes(export_onnx(checkpoint), onnx_spec(checkpoint)),
                             device="cpu")
    obs = _observations(checkpoint.spec.obs_shape)
    np.testing.assert_allclose(onnx_policy.logits(obs), torch_policy.logits(obs),
                               rtol=1e-5, atol=1e-5)
    assert onnx_policy.spec.obs_shape == checkpoint.spec.obs_shape


def test_export_onnx_file_writes_a_submission_the_catalog_loads(tmp_path: Path) -> None:
    checkpoint = write_checkpoint(tmp_path / "c4", "connect_four-v3", "cnn", {"channels": [4]})
    exported = export_onnx_file(tmp_path / "c4.safetensors", tmp_path / "out" / "c4.onnx")
    spec = json.loads((tmp_path / "out" / "c4.json").read_text())
    assert spec["arch"] == "onnx" and spec["env"] == "connect_four-v3"
    assert spec["hparams"] == {"source_arch": "cnn", "source_sha256": checkpoint.sha256}
    reloaded = load_onnx_file(tmp_path / "out" / "c4")
    assert reloaded.sha256 == exported.sha256
    assert (tmp_path / "out" / "c4.onnx").read_bytes() == exported.data
    policy = make_policy(f"file:{tmp_path / 'out' / 'c4.onnx'}", "connect_four-v3")
    assert isinstance(policy, OnnxPolicy) and policy.agent_id == f"onnx-{exported.sha256[:16]}"
    with pytest.raises(InvalidSubmission, match="for connect_four-v3, not tictactoe-v3"):
        make_policy(f"file:{tmp_path / 'out' / 'c4.onnx'}", "tictactoe-v3")


def test_export_refuses_an_invalid_checkpoint(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "agent", "tictactoe-v3", "mlp", {"hidden": [8]})
    (tmp_path / "agent.json").write_text('{"format_version": 1}')
    with pytest.raises(InvalidSubmission, match="missing required field"):
        export_onnx_file(tmp_path / "agent", tmp_path / "agent.onnx")
    assert not (tmp_path / "agent.onnx").exists()


def _play_against_random(env_id: str, policy, n: int = 24, seed: int = 0):
    """``n`` matches against ``random``: seats alternate in symmetric games, else by role."""
    random, env = make_policy("random", env_id), get_spec(env_id)
    team = env.team_of_role(policy.spec.role)
    jobs = []
    for i in range(n):
        agents = [random.agent_id] * env.num_teams
        agents[(team + i) % env.num_teams if env.symmetric else team] = policy.agent_id
        jobs.append(MatchJob(seed * 1000 + i, tuple(agents)))
    return play_matches(env_id, jobs, {policy.agent_id: policy, random.agent_id: random})


@pytest.mark.parametrize(("env_id", "arch", "role"), [("connect_four-v3", "cnn", None),
                                                      ("simple_tag-v3", "mlp", "predator")])
def test_exported_agent_plays_the_checkpoints_moves(
    tmp_path: Path, env_id: str, arch: str, role: str | None
) -> None:
    checkpoint = write_checkpoint(tmp_path / "agent", env_id, arch, seed=2, role=role)
    torch_policy = NeuralPolicy(checkpoint)
    onnx_policy = OnnxPolicy(validate_onnx_bytes(export_onnx(checkpoint), onnx_spec(checkpoint)),
                             device="cpu")
    by_torch = _play_against_random(env_id, torch_policy)
    by_onnx = _play_against_random(env_id, onnx_policy)
    assert all(r.termination in ("normal", "step_limit") for r in by_onnx)
    # Same sampling streams and logits equal up to float rounding: the same games,
    # except where two masked scores tie within that rounding.
    same = sum(a.actions == b.actions for a, b in zip(by_torch, by_onnx, strict=True))
    assert same >= 0.9 * len(by_onnx)
    assert {w for r in by_onnx for w in r.weights if w} == {onnx_policy.weights_hash}


@pytest.mark.parametrize("net_class", [TinyTransformer, ResidualCNN])
def test_architecture_outside_the_registry_validates_and_plays(net_class) -> None:
    env_id, obs_shape, num_actions = "connect_four-v3", (6, 7, 2), 7
    torch.manual_seed(7)
    net = net_class(obs_shape, num_actions)
    spec = {**spec_json(env_id), "hparams": {"source_arch": net_class.__name__}}
    policy = OnnxPolicy(validate_onnx_bytes(export_module(net, obs_shape), spec), device="cpu")
    obs = _observations(obs_shape, k=32, seed=1)
    with torch.no_grad():
        expected = net.eval()(torch.from_numpy(obs)).double().numpy()
    np.testing.assert_allclose(policy.logits(obs), expected, rtol=1e-4, atol=1e-5)
    records = _play_against_random(env_id, policy, n=16, seed=3)
    assert all(r.termination in ("normal", "step_limit") for r in records)
    assert sum(r.winner is not None for r in records) > 0  # real games with outcomes
