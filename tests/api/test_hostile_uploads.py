"""Hostile uploads to ``POST /agents``: each is refused with a useful 4xx, stores nothing,
and leaves the server serving.

The checkpoint validator has its own exhaustive unit tests (tests/agents); this corpus
checks the HTTP boundary: the form reader, the order of checks, the status codes and
that a refusal leaves no row, no Redis key and no file behind.
"""

from __future__ import annotations

import builtins
import io
import json
import pickle
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.torch
import torch

from tests.api.conftest import UPLOAD_LIMIT
from tests.api.helpers import API, ENV, checkpoint, new_user, stored_state, upload


class PlantMarker:
    """Unpickling this creates ``marker``: proof that code in the upload would have run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (str(self.marker), "w"))


def raw_safetensors(header: dict | bytes, data: bytes) -> bytes:
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + data


def zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"x": 1}))
    return buf.getvalue()


def poisoned(value: float) -> bytes:
    _, _, state = checkpoint()
    state = {k: v.clone() for k, v in state.items()}
    state["trunk.0.weight"][2, 3] = value
    return safetensors.torch.save(state)


def reshaped() -> bytes:
    _, _, state = checkpoint()
    return safetensors.torch.save({**state, "head.weight": torch.zeros(9, 7)})


def retyped(dtype: torch.dtype) -> bytes:
    _, _, state = checkpoint()
    return safetensors.torch.save({k: v.to(dtype) for k, v in state.items()})


def spec_with(**changes: Any) -> str:
    spec = json.loads(checkpoint()[1])
    spec.update(changes)
    return json.dumps(spec)


F32x2 = {"dtype": "F32", "shape": [2]}
GOOD_WEIGHTS, GOOD_SPEC, _ = checkpoint()

# case: (form fields as keyword arguments of ``upload``, status, fragments of the detail)
Case = tuple[Callable[[Path], dict[str, Any]], int, tuple[str, ...]]
CASES: dict[str, Case] = {
    "oversized weights": (
        lambda tmp: {"weights": checkpoint(hparams={"hidden": [64]})[0]}, 413,
        ("'weights' is over its limit", f"{UPLOAD_LIMIT:,} bytes"),
    ),
    "pickle named .safetensors": (
        lambda tmp: {"weights": pickle.dumps({"head.weight": [1.0, 2.0]})}, 422,
        ("not a safetensors file", "pickle"),
    ),
    "pickle with a payload": (
        lambda tmp: {"weights": pickle.dumps({"head.weight": PlantMarker(tmp / "pwned")})}, 422,
        ("not a safetensors file", "pickle"),
    ),
    "zip archive": (lambda tmp: {"weights": zip_bytes()}, 422, ("not a safetensors file", "zip")),
    "random bytes": (
        lambda tmp: {"weights": np.random.default_rng(0).bytes(2048)}, 422,
        ("not a safetensors file",),
    ),
    "header length over the limit": (
        lambda tmp: {"weights": struct.pack("<Q", 1 << 40) + b"{}"}, 422, ("header length",),
    ),
    "header not JSON": (
        lambda tmp: {"weights": raw_safetensors(b"{not json", b"")}, 422,
        ("header is not valid JSON",),
    ),
    "overlapping offsets": (
        lambda tmp: {"weights": raw_safetensors(
            {"a": {**F32x2, "data_offsets": [0, 8]}, "b": {**F32x2, "data_offsets": [4, 12]}},
            bytes(12))}, 422, ("'b' overlaps",),
    ),
    "trailing polyglot data": (
        lambda tmp: {"weights": GOOD_WEIGHTS + zip_bytes()}, 422, ("trailing bytes",),
    ),
    "wrong tensor shape": (
        lambda tmp: {"weights": reshaped()}, 422, ("'head.weight' has shape [9, 7], expected [9, 8]",),
    ),
    "wrong dtype": (lambda tmp: {"weights": retyped(torch.float16)}, 422, ("expected float32",)),
    "NaN weight": (lambda tmp: {"weights": poisoned(float("nan"))}, 422, ("NaN or infinite",)),
    "inf weight": (lambda tmp: {"weights": poisoned(float("inf"))}, 422, ("NaN or infinite",)),
    "unknown env": (lambda tmp: {"env": "nope-v1"}, 422, ("unknown env 'nope-v1'", ENV)),
    "unknown arch": (lambda tmp: {"spec": spec_with(arch="resnet9000")}, 422,
                     ("unknown arch 'resnet9000'", "mlp")),
    "spec not JSON": (lambda tmp: {"spec": "{'arch': mlp"}, 422, ("spec is not valid JSON",)),
    "spec not UTF-8": (lambda tmp: {"spec": b"\xff\xfe{}"}, 422, ("utf-8",)),
    "spec env is not the form env": (
        lambda tmp: {"env": "connect_four-v3"}, 422,
        ("spec is for env 'tictactoe-v3'", "env='connect_four-v3'"),
    ),
    "spec of another env's shapes": (
        lambda tmp: {"spec": spec_with(obs_shape=[6, 7, 2])}, 422, ("obs_shape",),
    ),
    "missing weights": (lambda tmp: {"weights": None}, 422, ("missing", "weights")),
    "missing spec": (lambda tmp: {"spec": None}, 422, ("missing", "spec")),
    "missing env": (lambda tmp: {"env": None}, 422, ("missing", "env")),
    "empty weights": (lambda tmp: {"weights": b""}, 422, ("missing or empty", "weights")),
    "unexpected field": (lambda tmp: {"loader": "pickle"}, 422, ("unexpected form field 'loader'",)),
    "bad agent name": (lambda tmp: {"name": "<script>"}, 422, ("name '<script>'",)),
    "oversized spec": (lambda tmp: {"spec": " " * 70_000}, 413, ("'spec' is over its limit",)),
}


def send(client, token: str, fields: dict[str, Any]):
    weights = fields.pop("weights", GOOD_WEIGHTS)
    spec = fields.pop("spec", GOOD_SPEC)
    if isinstance(spec, bytes):  # not text: send it as a file part
        return client.post(f"{API}/agents", headers={"Authorization": f"Bearer {token}"}, files=[
            ("weights", ("a.safetensors", weights)), ("spec", ("agent.json", spec)),
            ("env", (None, ENV)),
        ])
    return upload(client, token, weights, spec, **fields)


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_upload_is_refused_and_stores_nothing(client, services, tmp_path, case):
    token = new_user(client, "mallory")
    make, status, fragments = CASES[case]
    before = stored_state(services)
    response = send(client, token, make(tmp_path))
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    for fragment in fragments:
        assert fragment in detail, detail
    assert stored_state(services) == before
    assert not (tmp_path / "pwned").exists()
    assert client.get(f"{API}/health").json()["status"] == "ok"
    # ... and a good upload still goes through afterwards.
    assert upload(client, token, GOOD_WEIGHTS, GOOD_SPEC).status_code == 201


def test_the_pickle_payload_is_live(tmp_path):
    """Unpickled for real (in a child process), the corpus's payload does create its marker."""
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"head.weight": PlantMarker(marker)})
    code = "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"
    subprocess.run([sys.executable, "-c", code], input=payload, check=True, timeout=60)
    assert marker.exists()


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"json": {"weights": "AAAA"}}, "multipart/form-data"),
        ({"content": b"--x\r\nbroken", "headers": {"Content-Type": "multipart/form-data"}},
         "multipart/form-data"),
        ({"content": b"garbage without parts",
          "headers": {"Content-Type": "multipart/form-data; boundary=xyz"}}, "malformed multipart"),
        ({"content": b"--xyz\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--xyz--\r\n",
          "headers": {"Content-Type": "multipart/form-data; boundary=xyz"}}, "name="),
    ],
)
def test_malformed_bodies_are_refused(client, services, kwargs, fragment):
    token = new_user(client, "mallory")
    before = stored_state(services)
    kwargs = dict(kwargs)  # the parameters are shared by the sqlite and postgresql runs
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    response = client.post(f"{API}/agents", headers=headers, **kwargs)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["detail"]
    assert stored_state(services) == before


def test_upload_without_a_token_is_refused_before_reading(client, services):
    before = stored_state(services)
    response = upload(client, None, GOOD_WEIGHTS, GOOD_SPEC)
    assert response.status_code == 401 and "Bearer" in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"
    bad = upload(client, "arena_not-a-token", GOOD_WEIGHTS, GOOD_SPEC)
    assert bad.status_code == 401 and "invalid" in bad.json()["detail"]
    assert stored_state(services) == before
