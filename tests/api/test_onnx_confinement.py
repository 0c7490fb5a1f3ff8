"""The API and the ONNX sandbox's confinement: health says which layers workers get, and an
upload where a required layer is refused is a 503 that stores nothing.

The refusal is real, not faked: the API runs in a child process that puts itself under a
filter refusing ``unshare`` (:func:`tests.agents.onnx_escapes.refusal_api`), so its
validation workers cannot enter their network namespace, as under a container runtime's
profile; the test's own process stays unfiltered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.onnx_agents.confine import REQUIRED
from tests.api.helpers import API

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"rlimits", "network", "user", "landlock", "seccomp"}


def test_health_says_which_layers_onnx_workers_get(client) -> None:
    body = client.get(f"{API}/health").json()
    sandbox = body["onnx_sandbox"]
    assert sandbox["mode"] in ("required", "best-effort") and set(sandbox["layers"]) == LAYERS
    missing = [name for name in REQUIRED if not sandbox["layers"][name]["active"]]
    assert (sandbox["refused"] is not None) == (sandbox["mode"] == "required" and bool(missing))
    assert body["status"] == "ok"


@pytest.mark.timeout(300)  # a hang guard, not a timing assert
def test_an_upload_where_a_required_layer_is_refused_is_a_503_and_stores_nothing(
        tmp_path, migrated_db_url: str, redis_url: str) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.agents.onnx_escapes", "refusal-api", migrated_db_url,
                           redis_url, str(tmp_path / "arena")], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for status, body in (out["first"], out["second"]):  # the second is refused at once
        assert status == 503, body
        assert "sandbox is unavailable" in body["detail"] and "network" in body["detail"]
    assert out["stored_after"] == out["stored_before"]
    status, health = out["health"]
    assert status == 200 and health["onnx_sandbox"]["mode"] == "required"
    assert not health["onnx_sandbox"]["layers"]["network"]["active"]
    assert "sandbox is unavailable" in health["onnx_sandbox"]["refused"]
