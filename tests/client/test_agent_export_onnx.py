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
