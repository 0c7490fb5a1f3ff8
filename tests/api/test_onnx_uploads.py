"""ONNX models through ``POST /agents``: the honest one is accepted, every hostile one of
the shared corpus (tests/agents/onnx_corpus.py) is refused with a 4xx that says what to
fix, stores nothing (no row, no Redis key, no file) and leaves the server serving.

One test walks the whole corpus on one database (per backend) rather than one test per
model: each refusal is checked against the state just before it, so sharing the
services changes nothing but the time spent migrating databases.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from onnx import numpy_helper

from tests.agents.onnx_corpus import ENV, honest_model, hostile_corpus, play_time_hostiles, spec_json
from tests.api.helpers import API, auth, checkpoint, new_user, stored_state, upload

LIMIT = 1 << 20  # the corpus's node bomb (~0.5 MB) must reach the validator, not the size cap
PROBE_LIMIT_S = 0.5  # the endless loop is cut here (the service default is 5 s)


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"max_upload_bytes": LIMIT, "onnx_probe_limit_s": PROBE_LIMIT_S}


def send(client: TestClient, token: str, data: bytes, spec: dict, name: str = "onnx"):
    """``POST /agents`` of an ``agent.onnx`` file with its spec."""
    parts = [("weights", ("agent.onnx", data, "application/octet-stream")),
             ("spec", (None, json.dumps(spec))), ("env", (None, spec["env"])), ("name", (None, name))]
    return client.post(f"{API}/agents", files=parts, headers=auth(token))


def oversized() -> bytes:
    """The honest model with an unused 1.06 MB initializer: over the weights field's limit."""
    model = onnx.load_from_string(honest_model())
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(266_000, np.float32), "pad"))
    return model.SerializeToString()


def test_an_onnx_model_is_accepted_and_stored_as_onnx(client, services):
    assert "onnx" in client.get(f"{API}/envs/{ENV}").json()["archs"]
    token = new_user(client, "ada")
    data = honest_model(seed=3)
    created = send(client, token, data, spec_json(), name="linear onnx")
    assert created.status_code == 201, created.text
    agent = created.json()
    sha = hashlib.sha256(data).hexdigest()
    assert agent["key"] == f"onnx-{sha[:16]}" and agent["status"] == "queued"
    assert (agent["format"], agent["arch"]) == ("onnx", "onnx")
    assert services.pool.get(sha)[0] == data  # the exact bytes, content-addressed
    durable = sorted(p.name for p in services.settings.snapshot_dir.rglob(f"{sha}.*"))
    assert durable == [f"{sha}.json", f"{sha}.onnx"]
    again = send(client, token, data, spec_json())
    assert again.status_code == 409 and again.json()["existing_id"] == agent["id"]
    # A safetensors agent next to it says what it is too.
    weights, spec, _ = checkpoint(seed=4)
    st = upload(client, token, weights, spec).json()
    assert (st["format"], st["arch"], st["hparams"]) == ("safetensors", "mlp", {
        "hidden": [8], "activation": "relu"})
    page = client.get(f"/agents/{agent['id']}")
    assert page.status_code == 200 and "ONNX" in page.text


def test_every_hostile_onnx_model_is_refused_and_stores_nothing(client, services):
    token = new_user(client, "mallory")
    http_expect = {"empty": ("missing or empty", "weights")}  # the form reader refuses it first
    cases = [(c.name, c.data, c.spec, 422, http_expect.get(c.name, c.expect))
             for c in hostile_corpus() if c.name != "oversize"]
    cases += [
        ("oversize", oversized(), spec_json(), 413, ("'weights' is over its limit", f"{LIMIT:,}")),
        ("safetensors_with_onnx_spec", checkpoint()[0], spec_json(), 422, ("not an ONNX model",)),
    ]
    for name, data, spec, status, fragments in cases:
        before = stored_state(services)
        response = send(client, token, data, spec, name=name)
        assert response.status_code == status, (name, response.text)
        detail = response.json()["detail"]
        assert all(f in detail for f in fragments), (name, detail)
        assert stored_state(services) == before, name
        assert client.get(f"{API}/health").json()["status"] == "ok", name
    # ... and the server still takes a good model afterwards.
    assert send(client, token, honest_model(seed=9), spec_json()).status_code == 201


def test_models_that_misbehave_only_in_play_pass_validation(client):
    """Honest on the probe batches: they are accepted and must forfeit in matches
    (tests/ladder/test_onnx_ladder.py)."""
    token = new_user(client, "eve")
    for name, data in play_time_hostiles(ENV).items():
        response = send(client, token, data, spec_json(), name=name)
        assert response.status_code == 201, (name, response.text)
