"""Checkpoint save/load and the hostile-input corpus: every bad file is refused with a
message saying what is wrong, before any byte reaches a deserializer that could run code.
All files are real files in tmp_path."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import pickle
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from agents.checkpoint import load_checkpoint, load_checkpoint_bytes, save_checkpoint
from agents.checkpoint_spec import make_spec
from agents.checkpoint_weights import DEFAULT_MAX_BYTES
from agents.nets import build_net
from envs.errors import InvalidSubmission

HPARAMS = {"hidden": [16, 8]}


@pytest.fixture()
def c4() -> tuple[dict[str, torch.Tensor], dict]:
    """A valid small connect_four mlp: (state dict, spec JSON dict)."""
    spec = make_spec("connect_four-v3", "mlp", HPARAMS, name="tiny c4")
    torch.manual_seed(0)
    net = build_net("mlp", spec.hparams, spec.obs_shape, spec.num_actions)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}, spec.to_json()


def write_pair(tmp_path: Path, weights: bytes, spec: dict | str | bytes) -> Path:
    """Write agent.safetensors + agent.json; returns the .safetensors path."""
    (tmp_path / "agent.safetensors").write_bytes(weights)
    data = spec if isinstance(spec, (str, bytes)) else json.dumps(spec)
    (tmp_path / "agent.json").write_bytes(data.encode() if isinstance(data, str) else data)
    return tmp_path / "agent.safetensors"


def raw_safetensors(header: dict | bytes, data: bytes) -> bytes:
    """Hand-made safetensors bytes (the library would refuse to write bad ones)."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def rejected(path: Path, *fragments: str, **kwargs) -> str:
    """Load ``path``; assert InvalidSubmission whose message holds every fragment."""
    with pytest.raises(InvalidSubmission) as info:
        load_checkpoint(path, **kwargs)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# --- round trip -------------------------------------------------------------------


def test_save_load_round_trip(tmp_path: Path, c4) -> None:
    state_dict, spec = c4
    path = save_checkpoint(state_dict, spec, tmp_path / "agent.safetensors")
    assert path == tmp_path / "agent.safetensors"
    on_disk = json.loads((tmp_path / "agent.json").read_text())
    assert on_disk == {**spec, "hparams": {"hidden": [16, 8], "activation": "relu"}}
    for name in ("agent.safetensors", "agent.json", "agent"):
        loaded = load_checkpoint(tmp_path / name)
        assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert loaded.spec.env == "connect_four-v3" and loaded.spec.obs_shape == (6, 7, 2)
        assert loaded.spec.name == "tiny c4"
        assert set(loaded.state_dict) == set(state_dict)
        for key, tensor in state_dict.items():
            assert torch.equal(loaded.state_dict[key], tensor)


def test_load_bytes_accepts_spec_as_bytes_str_or_dict(tmp_path: Path, c4) -> None:
    state_dict, spec = c4
    path = save_checkpoint(state_dict, spec, tmp_path / "agent")
    weights = path.read_bytes()
    hashes = {
        load_checkpoint_bytes(weights, s).sha256
        for s in (json.dumps(spec).encode(), json.dumps(spec), spec)
    }
    assert hashes == {hashlib.sha256(weights).hexdigest()}


def test_save_is_byte_stable(tmp_path: Path, c4) -> None:
    state_dict, spec = c4
    a = save_checkpoint(state_dict, spec, tmp_path / "a").read_bytes()
    b = save_checkpoint(dict(reversed(list(state_dict.items()))), spec, tmp_path / "b").read_bytes()
    assert a == b


def test_save_refuses_what_load_would_refuse(tmp_path: Path, c4) -> None:
    state_dict, spec = c4
    state_dict["head.bias"][0] = float("nan")
    with pytest.raises(InvalidSubmission, match="NaN"):
        save_checkpoint(state_dict, spec, tmp_path / "agent")
    with pytest.raises(InvalidSubmission, match="not a role"):
        save_checkpoint(c4[0], {**spec, "role": "prey"}, tmp_path / "agent")
    assert list(tmp_path.iterdir()) == []


def test_simple_tag_roles_have_their_own_shapes(tmp_path: Path) -> None:
    for role, shape in (("predator", (16,)), ("prey", (14,))):
        spec = make_spec("simple_tag-v3", "mlp", {"hidden": [8]}, role=role)
        assert spec.obs_shape == shape and spec.num_actions == 5
        net = build_net("mlp", spec.hparams, shape, 5)
        path = save_checkpoint(net, spec, tmp_path / role)
        assert load_checkpoint(path).spec.role == role


# --- hostile weights ---------------------------------------------------------------


class PlantMarker:
    """A pickle whose loading creates a file: proof that code would have run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (str(self.marker), "w"))


def test_pickle_payload_is_refused_and_never_runs(tmp_path: Path, c4) -> None:
    proof = tmp_path / "proof_the_payload_is_live"
    pickle.loads(pickle.dumps(PlantMarker(proof))).close()
    assert proof.exists()
    marker = tmp_path / "pwned"
    path = write_pair(tmp_path, pickle.dumps({"head.weight": PlantMarker(marker)}), c4[1])
    rejected(path, "not a safetensors file", "pickle")
    assert not marker.exists()


def test_torch_save_zip_is_refused_and_never_runs(tmp_path: Path, c4) -> None:
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"x": PlantMarker(marker)}, buf)
    path = write_pair(tmp_path, buf.getvalue(), c4[1])
    rejected(path, "not a safetensors file", "zip archive")
    assert not marker.exists()


def test_oversized_file_is_refused_before_reading(tmp_path: Path, c4) -> None:
    path = write_pair(tmp_path, b"", c4[1])
    with open(path, "wb") as f:
        f.truncate(DEFAULT_MAX_BYTES + 1)  # sparse: cheap to make, costly if read
    rejected(path, "over the limit of 67,108,864 bytes")
    good = save_checkpoint(*c4, tmp_path / "ok")
    rejected(good, "over the limit", max_bytes=good.stat().st_size - 1)
    with pytest.raises(InvalidSubmission, match="over the limit"):
        load_checkpoint_bytes(good.read_bytes(), c4[1], max_bytes=100)


def _zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data.pkl", b"not really")
    return buf.getvalue()


def _retype(dtype: torch.dtype) -> Callable[[dict, bytes], bytes]:
    return lambda sd, good: safetensors.torch.save({k: v.to(dtype) for k, v in sd.items()})


def _with(sd: dict, **changes) -> bytes:
    out = {**sd, **changes}
    return safetensors.torch.save({k: v for k, v in out.items() if v is not None})


def _poison(value: float) -> Callable[[dict, bytes], bytes]:
    def make(sd: dict, good: bytes) -> bytes:
        weight = sd["trunk.1.weight"].clone()
        weight[3, 2] = value
        return _with(sd, **{"trunk.1.weight": weight})

    return make


F32x2 = {"dtype": "F32", "shape": [2]}
HOSTILE_WEIGHTS: dict[str, tuple[Callable[[dict, bytes], bytes], tuple[str, ...]]] = {
    "empty": (lambda sd, g: b"", ("not a safetensors file", "only 0 bytes")),
    "random bytes": (
        lambda sd, g: np.random.default_rng(0).bytes(4096),
        ("not a safetensors file",),
    ),
    "zip archive": (lambda sd, g: _zip_bytes(), ("not a safetensors file", "zip")),
    "header length larger than file": (
        lambda sd, g: struct.pack("<Q", len(g)) + g[8:],
        ("not a safetensors file", "header length"),
    ),
    "header larger than limit": (
        lambda sd, g: raw_safetensors(b"{}" + b" " * (2 << 20), b""),
        ("header length",),
    ),
    "header not JSON": (
        lambda sd, g: raw_safetensors(b"\x00garbage{", b""),
        ("header is not valid JSON",),
    ),
    "header is a JSON list": (
        lambda sd, g: raw_safetensors(b"[1, 2]", b""),
        ("not a JSON object",),
    ),
    "header duplicate keys": (
        lambda sd, g: raw_safetensors(b'{"a": {}, "a": {}}', b""),
        ("duplicate key 'a'",),
    ),
    "overlapping tensors": (
        lambda sd, g: raw_safetensors(
            {"a": {**F32x2, "data_offsets": [0, 8]}, "b": {**F32x2, "data_offsets": [4, 12]}},
            bytes(12),
        ),
        ("'b' overlaps",),
    ),
    "gap between tensors": (
        lambda sd, g: raw_safetensors(
            {"a": {**F32x2, "data_offsets": [0, 8]}, "b": {**F32x2, "data_offsets": [12, 20]}},
            bytes(20),
        ),
        ("4 unused bytes before tensor 'b'",),
    ),
    "trailing bytes (polyglot)": (lambda sd, g: g + _zip_bytes(), ("trailing bytes",)),
    "offsets outside buffer": (
        lambda sd, g: raw_safetensors({"a": {**F32x2, "data_offsets": [0, 8]}}, bytes(4)),
        ("fall outside",),
    ),
    "offsets disagree with shape": (
        lambda sd, g: raw_safetensors(
            {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)
        ),
        ("needs 12",),
    ),
    "negative shape": (
        lambda sd, g: raw_safetensors(
            {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 0]}}, b""
        ),
        ("non-negative integers",),
    ),
    "extra entry field": (
        lambda sd, g: raw_safetensors({"a": {**F32x2, "data_offsets": [0, 8], "x": 1}}, bytes(8)),
        ("exactly dtype, shape, data_offsets",),
    ),
    "metadata not strings": (
        lambda sd, g: raw_safetensors({"__metadata__": {"k": 1}}, b""),
        ("__metadata__",),
    ),
    "dtype I32": (_retype(torch.int32), ("dtype 'I32'", "allowed: F64, F32, F16, BF16")),
    "dtype F64": (_retype(torch.float64), ("dtype float64, expected float32",)),
    "dtype F16": (_retype(torch.float16), ("dtype float16, expected float32",)),
    "wrong shape": (
        lambda sd, g: _with(sd, **{"head.weight": torch.zeros(7, 9)}),
        ("'head.weight' has shape [7, 9], expected [7, 8]",),
    ),
    "missing tensor": (
        lambda sd, g: _with(sd, **{"head.bias": None}),
        ("missing tensors: head.bias",),
    ),
    "extra tensor": (
        lambda sd, g: _with(sd, payload=torch.zeros(3)),
        ("unexpected tensors: payload",),
    ),
    "NaN weight": (_poison(float("nan")), ("'trunk.1.weight' contains NaN or infinite",)),
    "inf weight": (_poison(float("-inf")), ("'trunk.1.weight' contains NaN or infinite",)),
}


@pytest.mark.parametrize("case", list(HOSTILE_WEIGHTS))
def test_hostile_weights_are_refused(tmp_path: Path, c4, case: str) -> None:
    state_dict, spec = c4
    good = safetensors.torch.save(state_dict)
    make, fragments = HOSTILE_WEIGHTS[case]
    path = write_pair(tmp_path, make(state_dict, good), spec)
    message = rejected(path, *fragments)
    assert message.startswith("agent.safetensors: ")


# --- hostile specs -----------------------------------------------------------------

HOSTILE_SPECS: dict[str, tuple[Callable[[dict], dict | str | bytes], tuple[str, ...]]] = {
    "not JSON": (lambda s: "{'env': connect_four}", ("spec is not valid JSON",)),
    "not UTF-8": (lambda s: b"\xff\xfe{}", ("spec is not valid JSON",)),
    "NaN constant": (lambda s: json.dumps(s)[:-1] + ', "num_actions": NaN}', ("not valid JSON",)),
    "JSON list": (lambda s: [s], ("spec must be a JSON object",)),
    "unknown field": (lambda s: {**s, "loader": "pickle"}, ("unknown spec field(s) ['loader']",)),
    "missing field": (
        lambda s: {k: v for k, v in s.items() if k != "role"},
        ("missing required field 'role'",),
    ),
    "future version": (lambda s: {**s, "format_version": 2}, ("unsupported format_version 2",)),
    "version as string": (lambda s: {**s, "format_version": "1"}, ("unsupported format_version",)),
    "unknown env": (
        lambda s: {**s, "env": "chess-v9"},
        ("unknown env 'chess-v9'", "connect_four-v3"),
    ),
    "unknown arch": (
        lambda s: {**s, "arch": "transformer"},
        ("unknown arch 'transformer'", "cnn, mlp"),
    ),
    "role not in env": (
        lambda s: {**s, "role": "predator"},
        ("role 'predator' is not a role of connect_four-v3",),
    ),
    "wrong obs_shape": (lambda s: {**s, "obs_shape": [42, 2]}, ("expected [6, 7, 2]",)),
    "wrong num_actions": (lambda s: {**s, "num_actions": 9}, ("expected 7",)),
    "num_actions float": (lambda s: {**s, "num_actions": 7.0}, ("num_actions 7.0",)),
    "bad name": (lambda s: {**s, "name": "<script>"}, ("name '<script>'",)),
    "hparam unknown key": (
        lambda s: {**s, "hparams": {"hiden": [8]}},
        ("unknown hyper-parameter(s) 'hiden'",),
    ),
    "hparam wrong type": (
        lambda s: {**s, "hparams": {"hidden": "big"}},
        ("'hidden' must be a list",),
    ),
    "hparam bool": (
        lambda s: {**s, "hparams": {"hidden": [True]}},
        ("'hidden[0]' must be an integer",),
    ),
    "hparam out of range": (lambda s: {**s, "hparams": {"hidden": [0]}}, ("in [1, 4096], got 0",)),
    "hparam too many params": (
        lambda s: {**s, "hparams": {"hidden": [4096] * 4}},
        ("parameters, more than",),
    ),
    "hparam activation": (lambda s: {**s, "hparams": {"activation": "gelu"}}, ("relu, tanh",)),
    "hparams not object": (lambda s: {**s, "hparams": [16, 8]}, ("hparams must be a JSON object",)),
    "hparams disagree with weights": (
        lambda s: {**s, "hparams": {"hidden": [16, 9]}},
        ("has shape",),
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_SPECS))
def test_hostile_specs_are_refused(tmp_path: Path, c4, case: str) -> None:
    state_dict, spec = c4
    make, fragments = HOSTILE_SPECS[case]
    bad = make(spec)
    path = write_pair(
        tmp_path,
        safetensors.torch.save(state_dict),
        bad if isinstance(bad, (str, bytes)) else json.dumps(bad),
    )
    rejected(path, *fragments)


def test_cnn_refused_for_vector_observations(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidSubmission, match=r"needs a board observation \(H, W, C\).*use arch 'mlp'"
    ):
        make_spec("simple_tag-v3", "cnn", role="prey")


def test_missing_spec_file_is_explained(tmp_path: Path, c4) -> None:
    path = tmp_path / "agent.safetensors"
    path.write_bytes(safetensors.torch.save(c4[0]))
    rejected(path, "spec file", "agent.json", "does not exist")
    rejected(tmp_path / "nothing", "weights file", "does not exist")
