"""The two kinds of snapshot bytes: safetensors weights of a registry arch, or an ONNX model.

A snapshot is bytes plus a spec, and the spec's ``arch`` says which kind the bytes are:
``"onnx"`` is an ONNX model (:mod:`agents.onnx_agents`), any other arch the safetensors
weights of that registry architecture (:mod:`agents.checkpoint_weights`). Either way the
snapshot's identity is the sha256 of its bytes. The two kinds are told apart here
(:func:`snapshot_format`), in one place:

* :func:`verify_snapshot`: the pool's checks before it stores bytes (the full
  safetensors validator; the static ONNX checks, the probe having run at submission);
* :func:`weights_suffix`: the durable copy's file name;
* :func:`arena.snapshots.cache.snapshot_policy`: the policy a worker, the service's
  validation or a challenge plays (:class:`~agents.neural.NeuralPolicy` or
  :class:`~agents.onnx_agents.policy.OnnxPolicy`), built where matches are played.

Nothing here needs torch: an API process stores and serves snapshots without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agents.checkpoint_spec import ONNX_ARCH, CheckpointSpec
from agents.checkpoint_weights import check_weights

__all__ = ["SnapshotFormat", "snapshot_format", "spec_json", "verify_snapshot", "weights_suffix"]

SnapshotFormat = Literal["safetensors", "onnx"]
SpecLike = CheckpointSpec | Mapping[str, Any]


def _arch(spec: SpecLike) -> Any:
    return spec.arch if isinstance(spec, CheckpointSpec) else spec.get("arch")


def snapshot_format(spec: SpecLike) -> SnapshotFormat:
    """``"onnx"`` for an ONNX spec, else ``"safetensors"``."""
    return "onnx" if _arch(spec) == ONNX_ARCH else "safetensors"


def weights_suffix(spec: SpecLike) -> str:
    """File suffix of a snapshot's bytes: ``.onnx`` or ``.safetensors``."""
    return f".{snapshot_format(spec)}"


def verify_snapshot(weights: bytes, spec: SpecLike, max_bytes: int) -> tuple[CheckpointSpec, str]:
    """Check bytes before they are stored as a snapshot; returns ``(spec, sha256)``.

    safetensors weights get the full checkpoint validator (header, every tensor,
    finiteness); an ONNX model gets the static checks of
    :func:`~agents.onnx_agents.policy.stored_onnx` (its probe batches ran when it was
    submitted, through :func:`~agents.onnx_agents.policy.validate_onnx_bytes`).

    Raises:
        InvalidSubmission: The bytes do not pass under ``spec``.
    """
    if snapshot_format(spec) == "onnx":
        from agents.onnx_agents.policy import stored_onnx

        model = stored_onnx(weights, spec, max_bytes)
        return model.spec, model.sha256
    checked = check_weights(weights, spec_json(spec), max_bytes=max_bytes)
    return checked.spec, checked.sha256


def spec_json(spec: SpecLike) -> dict[str, Any]:
    """The spec as its JSON dict."""
    return spec.to_json() if isinstance(spec, CheckpointSpec) else dict(spec)
