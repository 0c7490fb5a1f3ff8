"""An API process imports no torch: uploads are checked as bytes (agents.checkpoint_weights), and
networks are built only where matches are played (the background service, its workers).

In a fresh interpreter: the app as ``arena serve --no-service`` builds it, then a safetensors upload
checked as ``POST /agents`` checks it and as the snapshot pool checks it before storing, a refused one
too. torch (and the other runtimes only the service needs) must not have been imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICE_ONLY = ("torch", "safetensors.torch", "onnx", "onnxruntime", "ray")

CODE = f"""
import json, math, sys
from types import SimpleNamespace

import numpy as np
import safetensors.numpy

import arena.cli  # the `arena` command: `arena serve --no-service` starts the API
from agents.archs import state_shapes
from agents.checkpoint_spec import make_spec
from arena.api.app import create_app
from arena.ladder.submissions import Submission, validate_weights
from arena.snapshots.formats import verify_snapshot
from envs.errors import InvalidSubmission

create_app()
spec = make_spec("tictactoe-v3", "mlp", {{"hidden": [8]}})
tensors = {{k: np.full(s, 0.5, np.float32) for k, s in state_shapes(spec.arch, spec.hparams, spec.obs_shape,
                                                                       spec.num_actions).items()}}
weights = safetensors.numpy.save(tensors)
services = SimpleNamespace(settings=SimpleNamespace(max_upload_bytes=1 << 20))
upload = Submission(weights, json.dumps(spec.to_json()).encode(), "tictactoe-v3", None)
checked, sha = validate_weights(services, upload)
assert checked == spec and verify_snapshot(weights, spec, 1 << 20) == (spec, sha)
tensors["head.bias"][0] = math.nan
try:
    verify_snapshot(safetensors.numpy.save(tensors), spec, 1 << 20)
except InvalidSubmission as e:
    assert "NaN" in str(e), e
else:
    raise AssertionError("NaN weights were accepted")
print(",".join(m for m in {SERVICE_ONLY!r} if m in sys.modules))
"""


def test_the_api_and_its_upload_checks_import_no_torch() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], check=False, capture_output=True, text=True, timeout=300,
                          cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported by the API process: {done.stdout.strip()}"
