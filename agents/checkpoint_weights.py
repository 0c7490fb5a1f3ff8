"""A checkpoint's weights file checked as bytes: the trust boundary of every upload, without torch.

Anyone can upload a checkpoint. Nothing is ever unpickled, ``torch.load``-ed or
scripted: the safetensors header is parsed and checked first by our own strict reader
(:mod:`agents.safetensors_header`), then the bytes go to the safetensors library's
parser, then the tensors must be exactly the state dict of the spec's network (names,
shapes, float32, finite values; :func:`agents.archs.state_shapes` lists it by
arithmetic). The tensors come out as numpy arrays: the API validates uploads here and
never imports torch; :func:`agents.checkpoint.load_checkpoint_bytes` turns them into
torch tensors where a network is built. Every failure raises :class:`InvalidSubmission`
with a message saying what to fix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from safetensors import SafetensorError, deserialize  # the library's parser: bytes only, never code

from agents.archs import state_shapes
from agents.checkpoint_spec import ONNX_ARCH, CheckpointSpec, validate_spec
from agents.safetensors_header import DTYPE_NAMES, parse_header
from envs.errors import InvalidSubmission

__all__ = ["DEFAULT_MAX_BYTES", "CheckedWeights", "TensorLayout", "check_tensors", "check_weights"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Largest accepted weights file (64 MiB)."""

TensorLayout = Mapping[str, tuple[tuple[int, ...], str]]
"""Tensors as ``{name: (shape, dtype name)}``, the dtype named as numpy names it (``float32``)."""


@dataclass(frozen=True)
class CheckedWeights:
    """Weights that passed every check.

    Attributes:
        spec: The validated spec.
        tensors: float32 arrays, keys exactly those of the spec's network, in file order.
        sha256: Hex sha256 of the weights file bytes (the agent's identity).
    """

    spec: CheckpointSpec
    tensors: dict[str, np.ndarray] = field(repr=False)
    sha256: str


def _list(names: list[str], limit: int = 8) -> str:
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_tensors(
    spec: CheckpointSpec, layout: TensorLayout, finite: Callable[[str], bool] | None
) -> None:
    """Require tensors to be exactly the state dict of ``spec``'s network: keys, shapes, float32.

    Args:
        spec: A validated spec of a registry arch.
        layout: The tensors' names, shapes and dtypes.
        finite: Whether the tensor of a name holds finite values only (asked of each
            float32 tensor of the right shape, in the network's order); ``None``: not checked.

    Raises:
        InvalidSubmission: Listing missing/unexpected keys or the first bad tensor.
    """
    expected = state_shapes(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    missing = sorted(set(expected) - set(layout))
    unexpected = sorted(set(layout) - set(expected))
    if missing or unexpected:
        parts = ([f"missing tensors: {_list(missing)}"] if missing else []) + (
            [f"unexpected tensors: {_list(unexpected)}"] if unexpected else []
        )
        raise InvalidSubmission(
            f"weights do not match arch {spec.arch!r} with hparams {spec.hparams}: {'; '.join(parts)}"
        )
    for key, want in expected.items():
        shape, dtype = layout[key]
        if tuple(shape) != want:
            raise InvalidSubmission(
                f"tensor {key!r} has shape {list(shape)}, expected {list(want)} "
                f"for arch {spec.arch!r} with hparams {spec.hparams}"
            )
        if dtype != "float32":
            raise InvalidSubmission(
                f"tensor {key!r} has dtype {dtype}, expected "
                "float32; convert with tensor.float() before saving"
            )
        if finite is not None and not finite(key):
            raise InvalidSubmission(f"tensor {key!r} contains NaN or infinite values")


def _float32(data: bytearray, shape: tuple[int, ...]) -> np.ndarray:
    """The little-endian float32 tensor of a buffer, as a native array (a view where the CPU is little-endian)."""
    return np.frombuffer(data, dtype="<f4").astype(np.float32, copy=False).reshape(shape)


def check_weights(
    weights: bytes,
    spec_json: bytes | str | Mapping[str, Any],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> CheckedWeights:
    """Validate a checkpoint held in memory (e.g. an HTTP upload).

    Args:
        weights: Raw ``.safetensors`` bytes.
        spec_json: ``agent.json`` contents (bytes, str or parsed dict).
        max_bytes: Size limit of ``weights``.

    Returns:
        The validated weights; ``sha256`` is the hash of ``weights``.

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
    entries = parse_header(weights)
    try:
        views = deserialize(bytes(weights))
    except (SafetensorError, ValueError, RuntimeError) as e:  # ours should have caught it first
        raise InvalidSubmission(f"not a loadable safetensors file: {e}") from None
    data = {name: view["data"] for name, view in views}
    shapes = {e.name: e.shape for e in entries}  # file order
    check_tensors(spec, {e.name: (e.shape, DTYPE_NAMES[e.dtype]) for e in entries},
                  lambda key: bool(np.isfinite(_float32(data[key], shapes[key])).all()))
    return CheckedWeights(
        spec=spec,
        tensors={name: _float32(data[name], shape) for name, shape in shapes.items()},
        sha256=hashlib.sha256(weights).hexdigest(),
    )
