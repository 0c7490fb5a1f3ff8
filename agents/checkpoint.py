"""Checkpoints: ``agent.safetensors`` (weights) + ``agent.json`` (spec) with the same stem.

The spec format and its validation live in :mod:`agents.checkpoint_spec` (re-exported
here).

Loading is the trust boundary of the arena: anyone can upload a checkpoint. Nothing
is ever unpickled, ``torch.load``-ed or scripted. The safetensors header is parsed and
checked here first (:mod:`agents.safetensors_header`), then the bytes go to the
safetensors library, then the tensors must match exactly the state dict of
``build_net(arch, hparams, obs_shape, num_actions)``. Every failure raises
:class:`InvalidSubmission` with a message saying what to fix.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes  # tensors only, never code
from torch import nn

from agents.checkpoint_spec import (
    FORMAT_VERSION,
    MAX_SPEC_BYTES,
    ONNX_ARCH,
    SPEC_FIELDS,
    CheckpointSpec,
    make_spec,
    validate_spec,
)
from agents.nets import build_net
from agents.safetensors_header import parse_header
from envs.errors import InvalidSubmission

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMAT_VERSION",
    "SPEC_FIELDS",
    "CheckpointSpec",
    "LoadedCheckpoint",
    "check_state_dict",
    "checkpoint_paths",
    "load_checkpoint",
    "load_checkpoint_bytes",
    "make_spec",
    "save_checkpoint",
    "serialize_weights",
    "validate_spec",
]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Largest accepted weights file (64 MiB)."""


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A checkpoint that passed every check.

    Attributes:
        spec: The validated spec.
        state_dict: float32 CPU tensors, keys exactly those of ``build_net(...)``.
        sha256: Hex sha256 of the weights file bytes (the agent's identity).
    """

    spec: CheckpointSpec
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    sha256: str


def _list(names: list[str], limit: int = 8) -> str:
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_state_dict(
    spec: CheckpointSpec, state_dict: Mapping[str, torch.Tensor], *, require_finite: bool = True
) -> None:
    """Require ``state_dict`` to match ``build_net(spec)`` exactly: keys, shapes, float32.

    Args:
        spec: A validated spec.
        state_dict: Tensors to check.
        require_finite: Also reject NaN/inf values (always on for submissions).

    Raises:
        InvalidSubmission: Listing missing/unexpected keys or the first bad tensor.
    """
    with torch.device("meta"):
        expected = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions).state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    if missing or unexpected:
        parts = ([f"missing tensors: {_list(missing)}"] if missing else []) + (
            [f"unexpected tensors: {_list(unexpected)}"] if unexpected else []
        )
        raise InvalidSubmission(
            f"weights do not match arch {spec.arch!r} with hparams {spec.hparams}: {'; '.join(parts)}"
        )
    for key, want in expected.items():
        got = state_dict[key]
        if tuple(got.shape) != tuple(want.shape):
            raise InvalidSubmission(
                f"tensor {key!r} has shape {list(got.shape)}, expected {list(want.shape)} "
                f"for arch {spec.arch!r} with hparams {spec.hparams}"
            )
        if got.dtype != torch.float32:
            raise InvalidSubmission(
                f"tensor {key!r} has dtype {str(got.dtype).removeprefix('torch.')}, expected "
                "float32; convert with tensor.float() before saving"
            )
        if require_finite and not bool(torch.isfinite(got).all()):
            raise InvalidSubmission(f"tensor {key!r} contains NaN or infinite values")


def serialize_weights(state_dict: Mapping[str, torch.Tensor]) -> bytes:
    """Canonical safetensors bytes of a state dict (no metadata; byte-stable)."""
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state_dict.items()}
    return safetensors.torch.save(tensors)


def optimizer_tensors(optim: torch.optim.Optimizer, prefix: str = "optim") -> dict[str, torch.Tensor]:
    """An optimizer's per-parameter state as plain CPU tensors ``<prefix>.<i>.<name>`` (safetensors-ready).

    The param groups (learning rate etc.) are not included: the trainer's config rebuilds them.
    """
    return {f"{prefix}.{i}.{name}": torch.as_tensor(value).detach().to("cpu", copy=True).contiguous()
            for i, state in optim.state_dict()["state"].items() for name, value in state.items()}


def load_optimizer_tensors(optim: torch.optim.Optimizer, tensors: Mapping[str, torch.Tensor],
                           prefix: str = "optim") -> None:
    """Inverse of :func:`optimizer_tensors` (the param groups stay as they are)."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith(prefix + "."):
            i, name = key[len(prefix) + 1:].split(".", 1)
            state.setdefault(int(i), {})[name] = value
    if state:
        sd = optim.state_dict()
        sd["state"] = state
        optim.load_state_dict(sd)


def load_checkpoint_bytes(
    weights: bytes,
    spec_json: bytes | str | Mapping[str, Any],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> LoadedCheckpoint:
    """Validate and load a checkpoint held in memory (e.g. an HTTP upload).

    Args:
        weights: Raw ``.safetensors`` bytes.
        spec_json: ``agent.json`` contents (bytes, str or parsed dict).
        max_bytes: Size limit of ``weights``.

    Returns:
        The validated checkpoint; ``sha256`` is the hash of ``weights``.

    Raises:
        InvalidSubmission: Size, format, spec or tensor mismatch; the message says what to fix.
    """
    if len(weights) > max_bytes:
        raise InvalidSubmission(
            f"weights file is {len(weights):,} bytes, over the limit of {max_bytes:,} bytes"
        )
    spec = validate_spec(spec_json)
    if spec.arch == ONNX_ARCH:
        raise InvalidSubmission(
            f"the spec says \"arch\": \"{ONNX_ARCH}\", which goes with an .onnx model, not "
            "safetensors weights; submit the .onnx file, or give the spec the arch the "
            "weights were trained with (e.g. \"mlp\")"
        )
    parse_header(weights)
    try:
        state_dict = load_safetensors_bytes(bytes(weights))
    except (SafetensorError, ValueError, RuntimeError) as e:  # ours should have caught it first
        raise InvalidSubmission(f"not a loadable safetensors file: {e}") from None
    check_state_dict(spec, state_dict)
    return LoadedCheckpoint(
        spec=spec, state_dict=state_dict, sha256=hashlib.sha256(weights).hexdigest()
    )


def checkpoint_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(weights, spec)`` paths for ``x.safetensors``, ``x.json`` or the stem ``x``."""
    p = Path(path)
    if p.suffix in (".safetensors", ".json"):
        return p.with_suffix(".safetensors"), p.with_suffix(".json")
    return p.with_name(p.name + ".safetensors"), p.with_name(p.name + ".json")


def _read_limited(path: Path, limit: int, what: str) -> bytes:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InvalidSubmission(f"{what} {path} does not exist") from None
    if size > limit:
        raise InvalidSubmission(f"{path.name} is {size:,} bytes, over the limit of {limit:,} bytes")
    return path.read_bytes()


def load_checkpoint(
    path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> LoadedCheckpoint:
    """Validate and load ``agent.safetensors`` + ``agent.json`` from disk.

    Args:
        path: The ``.safetensors`` file, its ``.json`` spec, or their common stem.
        max_bytes: Size limit of the weights file (checked before reading it).

    Raises:
        InvalidSubmission: Missing file or any validation failure, prefixed with the file name.
    """
    weights_path, spec_path = checkpoint_paths(path)
    weights = _read_limited(weights_path, max_bytes, "weights file")
    spec_bytes = _read_limited(
        spec_path, MAX_SPEC_BYTES, f"spec file (expected beside {weights_path.name})"
    )
    try:
        return load_checkpoint_bytes(weights, spec_bytes, max_bytes=max_bytes)
    except InvalidSubmission as e:
        raise InvalidSubmission(f"{weights_path.name}: {e}") from None


def atomic_write(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one.

    Args:
        path: Destination; its folder is created if missing.
        data: The bytes.
        fsync: Flush to disk before the rename (durable copies want this).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(
    model: nn.Module | Mapping[str, torch.Tensor],
    spec: CheckpointSpec | Mapping[str, Any],
    path: str | os.PathLike,
) -> Path:
    """Write ``<stem>.safetensors`` + ``<stem>.json``; refuses anything ``load_checkpoint`` would.

    Args:
        model: A module built by :func:`agents.nets.build_net` or its state dict.
        spec: The spec (validated again here).
        path: The ``.safetensors`` path, the ``.json`` path or the stem.

    Returns:
        Path of the written ``.safetensors`` file.

    Raises:
        InvalidSubmission: The spec or weights would not load back.
    """
    spec = validate_spec(spec)
    state_dict = model.state_dict() if isinstance(model, nn.Module) else dict(model)
    check_state_dict(spec, state_dict)
    weights_path, spec_path = checkpoint_paths(path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    data = serialize_weights(state_dict)
    atomic_write(weights_path, data)
    atomic_write(spec_path, (json.dumps(spec.to_json(), indent=2) + "\n").encode())
    log.info("saved checkpoint %s (sha256 %s)", weights_path, hashlib.sha256(data).hexdigest()[:16])
    return weights_path
