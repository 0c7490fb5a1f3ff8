"""The two kinds of snapshot bytes: safetensors weights of a registry arch, or an ONNX model.

A snapshot is bytes plus a spec, and the spec's ``arch`` says which kind the bytes are:
``"onnx"`` is an ONNX model (:mod:`agents.onnx_agents`), any other arch the safetensors
weights of that registry architecture (:mod:`agents.checkpoint`). Either way the
snapshot's identity is the sha256 of its bytes. Everything that turns pooled bytes into
something goes through here, so the two kinds are told apart in one place:

* :func:`verify_snapshot`: the pool's checks before it stores bytes (the full
  safetensors validator; the static ONNX checks, the probe having run at submission);
* :func:`weights_suffix`: the durable copy's file name;
* :func:`snapshot_policy`: the policy a worker, the service's validation or a
  challenge plays (:class:`~agents.neural.NeuralPolicy` or
  :class:`~agents.onnx_agents.policy.OnnxPolicy`).

ONNX models are loaded and run only in the sandboxed worker processes of
:mod:`agents.onnx_agents.sandbox`, started when an ONNX snapshot is first met.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import torch

from agents.checkpoint import CheckpointSpec, load_checkpoint_bytes
from agents.checkpoint_spec import ONNX_ARCH
from agents.neural import NeuralPolicy

if TYPE_CHECKING:
    from agents.onnx_agents.policy import OnnxPolicy

log = logging.getLogger(__name__)

__all__ = ["SnapshotFormat", "onnx_device", "snapshot_format", "snapshot_policy",
           "verify_snapshot", "weights_suffix"]

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
    loaded = load_checkpoint_bytes(weights, _spec_json(spec), max_bytes=max_bytes)
    return loaded.spec, loaded.sha256


def _spec_json(spec: SpecLike) -> dict[str, Any]:
    return spec.to_json() if isinstance(spec, CheckpointSpec) else dict(spec)


@functools.cache
def _onnx_has_cuda() -> bool:
    # Asked of a sandboxed ONNX worker: this process never imports onnxruntime.
    from agents.onnx_agents.sandbox import default_sandbox

    return "CUDAExecutionProvider" in default_sandbox().hello().get("providers", [])


def onnx_device(device: str | torch.device) -> str:
    """The onnxruntime device for a worker on ``device``: its CUDA device where onnxruntime
    has the CUDA provider, else the CPU (a GPU worker still plays ONNX agents)."""
    name = str(device)
    if name.startswith("cuda") and not _onnx_has_cuda():
        log.info("onnxruntime has no CUDA provider (install onnxruntime-gpu); ONNX agents "
                 "run on the CPU")
        return "cpu"
    return name


def snapshot_policy(
    weights: bytes,
    spec: SpecLike,
    *,
    device: str | torch.device = "cpu",
    temperature: float = 1.0,
    time_limit_s: float,
    max_bytes: int,
) -> NeuralPolicy | OnnxPolicy:
    """The policy of stored snapshot bytes (after :func:`verify_snapshot`-level checks).

    Args:
        weights: The snapshot's bytes, already checked against their sha256.
        spec: Its spec.
        device: Where it runs (``"cpu"``, ``"cuda"``, ``"auto"``).
        temperature: Sampling temperature.
        time_limit_s: Deadline of one ``act`` call of an ONNX model: the engine's time
            budget, so an overrun run is terminated when the engine gives up on it.
            (Arena's own architectures run one bounded forward pass.)
        max_bytes: Largest accepted bytes.

    Raises:
        InvalidSubmission: The bytes fail validation under ``spec``.
    """
    if snapshot_format(spec) == "onnx":
        from agents.onnx_agents.policy import OnnxPolicy, stored_onnx

        model = stored_onnx(weights, spec, max_bytes)
        return OnnxPolicy(model, device=onnx_device(device), temperature=temperature,
                          time_limit_s=time_limit_s)
    checkpoint = load_checkpoint_bytes(weights, _spec_json(spec), max_bytes=max_bytes)
    return NeuralPolicy(checkpoint, device=device, temperature=temperature)
