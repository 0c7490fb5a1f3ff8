"""``arena agent export-onnx``: a checkpoint becomes an ONNX submission; nothing is overwritten."""

from __future__ import annotations

import json

from agents.neural import write_checkpoint
from agents.onnx_agents.policy import load_onnx_file
from tests.client.live import run_cli


def test_export_onnx_writes_a_valid_submission_and_refuses_to_overwrite(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "bot.safetensors", "connect_four-v3", "mlp",
                                  {"hidden": [16]}, seed=1)
    exported = run_cli("agent", "export-onnx", "bot.safetensors", home=tmp_path)
    assert exported.returncode == 0, exported.stderr
    model = load_onnx_file(tmp_path / "bot-onnx.onnx")  # the default name: beside the checkpoint
    assert model.sha256[:16] in exported.stdout and "arena submit" in exported.stdout
    spec = json.loads((tmp_path / "bot-onnx.json").read_text())
    assert spec["hparams"] == {"source_arch": "mlp", "source_sha256": checkpoint.sha256}
    again = run_cli("agent", "export-onnx", "bot.safetensors", home=tmp_path)
    assert again.returncode == 2 and "already exist" in again.stderr and "--force" in again.stderr
    # Its spec would replace the checkpoint's own bot.json: refused.
    clash = run_cli("agent", "export-onnx", "bot.safetensors", "--out", "bot.onnx", home=tmp_path)
    assert clash.returncode == 2 and "checkpoint's own spec" in clash.stderr
    assert json.loads((tmp_path / "bot.json").read_text())["arch"] == "mlp"
    assert not (tmp_path / "bot.onnx").exists()
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not weights")
    (tmp_path / "broken.json").write_text((tmp_path / "bot.json").read_text())
    refused = run_cli("agent", "export-onnx", "broken.safetensors", home=tmp_path)
    assert refused.returncode == 2 and "not a safetensors file" in refused.stderr


def test_export_onnx_turns_an_sb3_zip_into_a_submission(tmp_path):
    import numpy as np
    import torch
    from sb3_contrib import MaskablePPO

    import arena.gym
    from agents.catalog import make_policy
    from agents.onnx_agents.probe import probe_observations

    model = MaskablePPO("MlpPolicy", arena.gym.make("tictactoe-v3"), seed=0, n_steps=16, batch_size=16)
    model.save(tmp_path / "ppo.zip")
    missing = run_cli("agent", "export-onnx", "ppo.zip", home=tmp_path)
    assert missing.returncode == 2 and "--env" in missing.stderr
    exported = run_cli("agent", "export-onnx", "ppo.zip", "--env", "tictactoe-v3", home=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "MaskableActorCriticPolicy" in exported.stdout and "arena submit" in exported.stdout
    policy = make_policy(f"file:{tmp_path / 'ppo.onnx'}", "tictactoe-v3")  # ppo.onnx + ppo.json
    obs = probe_observations("tictactoe-v3", "player", 8).astype(np.float32)
    with torch.no_grad():
        want = model.policy.get_distribution(torch.as_tensor(obs)).distribution.logits.numpy()
    np.testing.assert_allclose(torch.log_softmax(torch.as_tensor(policy.logits(obs)), -1).numpy(), want, atol=1e-5)
    wrong = run_cli("agent", "export-onnx", "ppo.zip", "--env", "tictactoe-v3", "--sb3", "dqn", "--out", "q.onnx",
                    home=tmp_path)
    assert wrong.returncode == 2 and "cannot load" in wrong.stderr
