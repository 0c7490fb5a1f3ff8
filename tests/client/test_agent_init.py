"""``arena agent init``: a fresh policy on disk that loads through the full validator."""

from __future__ import annotations

import json

from agents.checkpoint import load_checkpoint
from tests.client.live import run_cli


def test_agent_init_writes_a_checkpoint_that_loads(tmp_path):
    out = tmp_path / "bots" / "c4.safetensors"
    res = run_cli("agent", "init", "--env", "connect_four-v3", "--arch", "mlp",
                  "--hparams", '{"hidden": [64, 64]}', "--seed", "3", "--name", "my bot",
                  "--out", str(out), home=tmp_path)
    assert res.returncode == 0, res.stderr
    ck = load_checkpoint(out)
    assert (ck.spec.env, ck.spec.arch, ck.spec.role, ck.spec.name) == ("connect_four-v3", "mlp", "player", "my bot")
    assert ck.spec.hparams["hidden"] == [64, 64]
    spec = json.loads(out.with_suffix(".json").read_text())
    assert spec["obs_shape"] == [6, 7, 2] and spec["num_actions"] == 7
    assert ck.sha256[:16] in res.stdout


def test_agent_init_is_deterministic_in_the_seed_and_refuses_to_overwrite(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    for path in (a, b):
        res = run_cli("agent", "init", "--env", "tictactoe-v3", "--arch", "cnn", "--seed", "0",
                      "--out", str(path), home=tmp_path)
        assert res.returncode == 0, res.stderr
    sha = load_checkpoint(a).sha256
    assert load_checkpoint(b).sha256 == sha
    again = run_cli("agent", "init", "--env", "tictactoe-v3", "--out", str(a), home=tmp_path)
    assert again.returncode == 2
    assert "already exist" in again.stderr and "--force" in again.stderr
    assert load_checkpoint(a).sha256 == sha  # untouched
    forced = run_cli("agent", "init", "--env", "tictactoe-v3", "--arch", "cnn", "--seed", "1",
                     "--force", "--out", str(a), home=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert load_checkpoint(a).sha256 != sha  # overwritten, and another seed gives other weights


def test_agent_init_user_errors_exit_2_with_the_reason(tmp_path):
    out = str(tmp_path / "x.safetensors")
    cases = [
        (["--hparams", '{"hidden": '], "--hparams is not valid JSON"),
        (["--env", "nope-v0"], "unknown env"),
        (["--arch", "transformer"], "transformer"),
        (["--hparams", '{"hidden": [64], "dropout": 0.1}'], "dropout"),
    ]
    for extra, message in cases:
        res = run_cli("agent", "init", "--out", out, *extra, home=tmp_path)
        assert res.returncode == 2, (extra, res.stdout, res.stderr)
        assert message in res.stderr, (extra, res.stderr)
    assert not (tmp_path / "x.safetensors").exists()
