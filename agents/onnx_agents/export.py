"""Export Arena checkpoints (and any torch policy net) to ONNX submissions.

``arena agent export-onnx agent.safetensors agent.onnx`` calls
:func:`export_onnx_file`: the checkpoint is loaded through the full validator, its
network rebuilt from the registry, exported with torch's TorchScript-based exporter
(``dynamo=False``: it needs only ``onnx``, not ``onnxscript``) at opset
:data:`EXPORT_OPSET` with a dynamic batch axis, validated exactly as the server will
validate it, and written as ``agent.onnx`` + ``agent.json`` (``"arch": "onnx"``).
"""

from __future__ import annotations

import io
import json
import logging
import os
import warnings

import torch
from torch import nn

from agents.checkpoint import LoadedCheckpoint, load_checkpoint
from agents.checkpoint_spec import ONNX_ARCH, CheckpointSpec, validate_spec
from agents.files import atomic_write
from agents.nets import build_net
from agents.onnx_agents.policy import ValidatedOnnx, onnx_paths, validate_onnx_bytes

log = logging.getLogger(__name__)

EXPORT_OPSET = 17
INPUT_NAME = "obs"
OUTPUT_NAME = "logits"


def export_module(module: nn.Module, obs_shape: tuple[int, ...], *, opset: int = EXPORT_OPSET) -> bytes:
    """ONNX bytes of ``module`` (float32 ``(k, *obs_shape)`` -> logits ``(k, A)``).

    The batch axis of input ``obs`` and output ``logits`` is dynamic. The module is
    exported in eval mode and left in the mode it was in.

    Args:
        module: Any torch module with that signature (not only registry architectures).
        obs_shape: Observation shape of one decision.
        opset: Default-domain opset to export.
    """
    was_training = module.training
    module.eval()
    example = torch.zeros((2, *obs_shape), dtype=torch.float32)
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter is deprecated in favour of the dynamo one, which
            # needs onnxscript; this one is still supported and needs nothing more.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                module, (example,), buffer, dynamo=False, opset_version=opset,
                input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
                do_constant_folding=True,
            )
    finally:
        module.train(was_training)
    return buffer.getvalue()


def onnx_spec(checkpoint: LoadedCheckpoint) -> CheckpointSpec:
    """The spec of ``checkpoint``'s ONNX export: same env, role, shapes and name."""
    raw = checkpoint.spec.to_json()
    raw["arch"] = ONNX_ARCH
    raw["hparams"] = {"source_arch": checkpoint.spec.arch, "source_sha256": checkpoint.sha256}
    return validate_spec(raw)


def export_onnx(checkpoint: LoadedCheckpoint, *, opset: int = EXPORT_OPSET) -> bytes:
    """ONNX bytes of a registry checkpoint (mlp, cnn) with the same logits.

    Args:
        checkpoint: A validated checkpoint (:func:`agents.checkpoint.load_checkpoint`).
        opset: Default-domain opset to export.
    """
    spec = checkpoint.spec
    net = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    net.load_state_dict(checkpoint.state_dict, strict=True)
    return export_module(net, spec.obs_shape, opset=opset)


def export_onnx_file(
    checkpoint_path: str | os.PathLike, out_path: str | os.PathLike
) -> ValidatedOnnx:
    """Convert ``<stem>.safetensors`` + ``.json`` into ``<out>.onnx`` + ``<out>.json``.

    Args:
        checkpoint_path: The checkpoint's ``.safetensors``, ``.json`` or stem.
        out_path: The ``.onnx`` path (or stem) to write; the spec goes beside it.

    Returns:
        The export as the server's validator accepted it (``sha256`` is its identity).

    Raises:
        InvalidSubmission: The checkpoint is invalid, or its export fails validation.
    """
    checkpoint = load_checkpoint(checkpoint_path)
    validated = validate_onnx_bytes(export_onnx(checkpoint), onnx_spec(checkpoint))
    model_path, spec_path = onnx_paths(out_path)
    atomic_write(model_path, validated.data)
    atomic_write(spec_path, (json.dumps(validated.spec.to_json(), indent=2) + "\n").encode())
    log.info("exported %s to %s (sha256 %s)", checkpoint_path, model_path, validated.sha256[:16])
    return validated
