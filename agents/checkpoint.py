"""Checkpoints: ``agent.safetensors`` (weights) + ``agent.json`` (spec) with the same stem, as torch tensors.

The spec format and its validation live in :mod:`agents.checkpoint_spec` (import them
from there).

Loading is the trust boundary of the arena: anyone can upload a checkpoint. The bytes
are checked without torch by :func:`agents.checkpoint_weights.check_weights` (header,
the safetensors library's parser, every tensor's name, shape, dtype and values; what the
API runs on an upload); loading here adds only the step to torch tensors, for building
the network. Every failure raises :class:`InvalidSubmission` with a message saying what
to fix.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from agents.checkpoint_spec import (
    MAX_SPEC_BYTES,
    CheckpointSpec,
    validate_spec,
)
from agents.checkpoint_weights import DEFAULT_MAX_BYTES, check_tensors, check_weights
from agents.files import atomic_write
from envs.errors import InvalidSubmission

log = logging.getLogger(__name__)

__all__ = [
    "LoadedCheckpoint",
    "check_state_dict",
    "checkpoint_paths",
    "load_checkpoint",
    "load_checkpoint_bytes",
    "load_optimizer_tensors",
    "optimizer_tensors",
    "save_checkpoint",
    "serialize_weights",
]


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


def check_state_dict(
    spec: CheckpointSpec, state_dict: Mapping[str, torch.Tensor], *, require_finite: bool = True
) -> None:
    """Require ``state_dict`` to match ``build_net(spec)`` exactly: keys, shapes, float32.

    The checks of :func:`agents.checkpoint_weights.check_tensors`, on torch tensors.

    Args:
        spec: A validated spec.
        state_dict: Tensors to check.
        require_finite: Also reject NaN/inf values (always on for submissions).

    Raises:
        InvalidSubmission: Listing missing/unexpected keys or the first bad tensor.
    """
    layout = {k: (tuple(v.shape), str(v.dtype).removeprefix("torch.")) for k, v in state_dict.items()}
    check_tensors(spec, layout,
                  (lambda key: bool(torch.isfinite(state_dict[key]).all())) if require_finite else None)


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
    """Validate and load a checkpoint held in memory (e.g. a pooled snapshot).

    :func:`agents.checkpoint_weights.check_weights` (its arguments, checks and errors), then
    the checked tensors as torch tensors sharing their memory.
    """
    checked = check_weights(weights, spec_json, max_bytes=max_bytes)
    state_dict = {key: torch.from_numpy(array) for key, array in checked.tensors.items()}
    return LoadedCheckpoint(spec=checked.spec, state_dict=state_dict, sha256=checked.sha256)


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
