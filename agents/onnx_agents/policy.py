"""ONNX submissions: validate an untrusted ``.onnx`` file, then play it as a batched Policy.

A submission is ``agent.onnx`` plus the usual ``agent.json`` spec with
``"arch": "onnx"`` (env, role, obs_shape, num_actions as for any checkpoint). The
graph maps float32 observations ``[batch, *obs_shape]`` to logits
``[batch, num_actions]``; Arena masks illegal actions and samples exactly as for its
own networks (:class:`~agents.neural.NeuralPolicy`), so a policy exported from an
Arena checkpoint plays the same moves as the checkpoint.

:func:`validate_onnx_bytes` is the trust boundary, in this order: size; spec; the
static checks of :mod:`agents.onnx_agents.model` (protobuf parse, opsets, domains, external
data, declared tensor sizes, signature); ``onnx.checker``; an onnxruntime session
(:mod:`agents.onnx_agents.session`); then probe batches of real observations
(:mod:`agents.onnx_agents.probe`) that must finish within a deadline and give finite logits
of the right shape. Nothing is stored or run before the static checks pass, and every
failure is an :class:`InvalidSubmission` that says what to fix.

Nothing here loads or runs a graph in this process: the checker, the sessions, the
probe runs and every :class:`OnnxPolicy` run happen in the confined worker processes
of :mod:`agents.onnx_agents.sandbox` (this module does not even import onnxruntime).
The observations go to a worker and its logits come back; masking and sampling stay
here, so a sandboxed run plays exactly the moves an in-process one did.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from agents.checkpoint_spec import MAX_SPEC_BYTES, ONNX_ARCH, CheckpointSpec, validate_spec
from agents.checkpoint_weights import DEFAULT_MAX_BYTES
from agents.neural import sample_masked
from agents.onnx_agents.model import check_signature, check_structure, parse_model
from agents.onnx_agents.probe import PROBE_ROWS, probe_observations, run_probes
from agents.onnx_agents.process import SandboxCrashed, SandboxUnavailable
from agents.onnx_agents.sandbox import OnnxSandbox, SandboxedModel, default_sandbox, validation_sandbox
from agents.policy import MatchRng, PolicyCrashed
from envs.errors import InvalidSubmission

log = logging.getLogger(__name__)

PROBE_LIMIT_S = 5.0
"""Deadline of one validation probe run."""
DEFAULT_TIME_LIMIT_S = 10.0
"""Deadline of one ``act`` call when none is given (the engine's default budget)."""
LOAD_LIMIT_S = 10.0
"""Longest ``onnx.checker`` or a session load may take (in the worker)."""


@dataclass(frozen=True)
class ValidatedOnnx:
    """An ONNX model that passed every check.

    Attributes:
        spec: The validated spec (``arch == "onnx"``).
        data: The model bytes exactly as submitted.
        sha256: Hex sha256 of ``data`` (the agent's identity).
        input_name: The graph's observation input.
        output_name: The graph's logits output.
        opset: Its default-domain opset.
    """

    spec: CheckpointSpec
    data: bytes = field(repr=False)
    sha256: str
    input_name: str
    output_name: str
    opset: int

    def sandboxed(self, device: str = "cpu", threads: int = 1) -> SandboxedModel:
        """What a worker needs to load it; the key names the model, device and threads."""
        return SandboxedModel(f"{self.sha256}:{device}:{threads}", self.data, self.input_name,
                              self.output_name, device, threads)


def _check_static(
    data: bytes, spec: bytes | str | Mapping[str, Any] | CheckpointSpec, max_bytes: int
) -> tuple[ValidatedOnnx, onnx.ModelProto]:
    """Size, spec and the static checks of :mod:`agents.onnx_agents.model` (nothing is run)."""
    if len(data) > max_bytes:
        raise InvalidSubmission(
            f"ONNX file is {len(data):,} bytes, over the limit of {max_bytes:,} bytes"
        )
    spec = validate_spec(spec)
    if spec.arch != ONNX_ARCH:
        raise InvalidSubmission(
            f"the spec says arch {spec.arch!r}; an .onnx file needs \"arch\": \"onnx\""
        )
    model = parse_model(data)
    opset = check_structure(model)
    input_name, output_name = check_signature(model, spec.obs_shape, spec.num_actions)
    sha = hashlib.sha256(data).hexdigest()
    return ValidatedOnnx(spec, bytes(data), sha, input_name, output_name, opset), model


def validate_onnx_bytes(
    data: bytes,
    spec: bytes | str | Mapping[str, Any] | CheckpointSpec,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    probe_limit_s: float = PROBE_LIMIT_S,
    sandbox: OnnxSandbox | None = None,
) -> ValidatedOnnx:
    """Validate an untrusted ONNX model and its spec (see the module docstring).

    The static checks run here; ``onnx.checker``, the session load and the probe runs
    in one leased worker process of ``sandbox``, which is killed if it overruns.

    Args:
        data: The ``.onnx`` bytes.
        spec: ``agent.json`` contents; its ``arch`` must be ``"onnx"``.
        max_bytes: Size limit of ``data``, checked before anything else.
        probe_limit_s: Deadline of each probe run.
        sandbox: Where it runs (default: this process's :func:`validation_sandbox`).

    Returns:
        The validated model; nothing was stored.

    Raises:
        InvalidSubmission: With a message saying what to fix (also when the model
            crashed or overran its worker process).
        SandboxUnavailable: No worker process could be started (the server's fault).
    """
    validated, _ = _check_static(data, spec, max_bytes)
    spec = validated.spec
    probe = probe_observations(spec.env, spec.role, PROBE_ROWS)
    model = validated.sandboxed()
    sandbox = sandbox or validation_sandbox()
    with sandbox.lease(model.key) as lease:
        try:
            run_probes(lease, model, probe, spec.num_actions, probe_limit_s, LOAD_LIMIT_S)
        except SandboxCrashed as exc:
            raise InvalidSubmission(
                f"the model's validation process died ({exc}); it crashed onnxruntime or was "
                "killed at a resource limit. Nothing was stored"
            ) from None
    log.info("validated ONNX model %s for %s/%s (opset %d) in worker %d", validated.sha256[:16],
             spec.env, spec.role, validated.opset, lease.pid)
    return validated


def stored_onnx(
    data: bytes,
    spec: bytes | str | Mapping[str, Any] | CheckpointSpec,
    max_bytes: int | None = None,
) -> ValidatedOnnx:
    """A model that passed :func:`validate_onnx_bytes` before, read back from Arena's store.

    Repeats only the static checks (milliseconds; defence in depth against a store that
    was written by other means), not the checker and the probe runs. Never use it for
    bytes that come from a user.

    Args:
        data: The stored ``.onnx`` bytes.
        spec: Its stored spec.
        max_bytes: Size limit (``None``: no limit beyond what was stored).

    Raises:
        InvalidSubmission: The bytes fail the static checks.
    """
    return _check_static(data, spec, len(data) if max_bytes is None else max_bytes)[0]


class OnnxPolicy:
    """A validated ONNX model answering batches of decisions in a sandboxed worker process.

    The session lives in a worker process of :mod:`agents.onnx_agents.sandbox` (loaded
    when the policy is built, and again in another worker when one dies); each
    :meth:`logits` call sends the batch there and gets the logits back. Masking and
    sampling run here, with :func:`~agents.neural.sample_masked`.

    Args:
        model: A model that passed :func:`validate_onnx_bytes`.
        device: ``"cpu"``, ``"cuda"``/``"cuda:N"`` or ``"auto"`` (CUDA when onnxruntime
            has the provider).
        temperature: Softmax temperature for sampling; ``0`` means greedy argmax.
        time_limit_s: Deadline of one ``act`` call; pass the engine's time budget. A run
            past it is terminated, or its worker killed, and ``act`` raises
            :class:`TimeoutError` (a ``timeout`` forfeit of the call's matches).
        threads: onnxruntime intra-op threads.
        sandbox: The worker pool (default: this process's, CPU or CUDA workers).

    Attributes:
        agent_id: ``f"onnx-{sha256[:16]}"``.
        weights_hash: sha256 of the ``.onnx`` bytes.
        spec: The spec (env, role, shapes).
    """

    # Not marked bounded: the sandbox does bound every call (its worker is killed
    # shortly after the deadline), but the engine's watchdog still returns exactly at
    # the budget.
    bounded_runtime = False

    def __init__(
        self,
        model: ValidatedOnnx,
        device: str = "auto",
        temperature: float = 1.0,
        *,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        threads: int = 1,
        sandbox: OnnxSandbox | None = None,
    ) -> None:
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature)
                and temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        if not time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0, got {time_limit_s!r}")
        self.spec: CheckpointSpec = model.spec
        self.weights_hash: str | None = model.sha256
        self.agent_id = f"{ONNX_ARCH}-{model.sha256[:16]}"
        self.temperature = float(temperature)
        self.time_limit_s = float(time_limit_s)
        device = _resolve_device(str(device), sandbox)
        self._sandbox = sandbox or default_sandbox(gpu=device.startswith("cuda"))
        self._model = model.sandboxed(device, threads)
        with self._sandbox.lease(self._model.key) as lease:
            providers = lease.load(self._model, LOAD_LIMIT_S)
        self.device = "cuda" if "CUDAExecutionProvider" in providers else "cpu"

    def __repr__(self) -> str:
        return (
            f"OnnxPolicy({self.agent_id!r}, env={self.spec.env!r}, role={self.spec.role!r}, "
            f"device={self.device!r}, temperature={self.temperature})"
        )

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """Raw float64 logits ``(k, num_actions)`` of one batched run.

        Raises:
            TimeoutError: The run passed ``time_limit_s`` (terminated, or its worker
                killed), or no worker became idle within it.
            PolicyCrashed: The worker process died under the run (it is replaced).
            ValueError: Observations of the wrong shape, or a wrongly shaped output.
        """
        obs = np.asarray(obs)
        if obs.shape[1:] != self.spec.obs_shape:
            raise ValueError(
                f"{self.agent_id} expects observations (k, *{self.spec.obs_shape}), got {obs.shape}"
            )
        try:
            with self._sandbox.lease(self._model.key, wait_s=self.time_limit_s) as lease:
                out = lease.run(self._model, np.ascontiguousarray(obs, dtype=np.float32),
                                self.time_limit_s, self.spec.num_actions, LOAD_LIMIT_S)
        except SandboxUnavailable as exc:
            raise PolicyCrashed(f"no ONNX worker process to run it: {exc}") from None
        if out.shape != (len(obs), self.spec.num_actions):
            raise ValueError(
                f"{self.agent_id} returned logits of shape {out.shape} for {len(obs)} observations"
            )
        return out.astype(np.float64)

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        """Sample one legal action per row, exactly as :meth:`NeuralPolicy.act` does.

        Returns:
            ``(k,)`` int64 actions (``-1`` for a row with no legal action), or float64
            with ``np.nan`` in rows whose logits were not finite (``invalid_output``).
        """
        # The same masked Gumbel-max sampling over this policy's logits, shared rather
        # than copied so an exported checkpoint keeps choosing the checkpoint's moves.
        return sample_masked(self, obs, mask, rng)


def _resolve_device(device: str, sandbox: OnnxSandbox | None) -> str:
    """``auto`` becomes ``cuda`` where the workers' onnxruntime has the CUDA provider."""
    if device != "auto":
        return device
    providers = (sandbox or default_sandbox()).hello().get("providers", [])
    return "cuda" if "CUDAExecutionProvider" in providers else "cpu"


def onnx_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(model, spec)`` paths for ``x.onnx``, ``x.json`` or the stem ``x``."""
    p = Path(path)
    if p.suffix in (".onnx", ".json"):
        return p.with_suffix(".onnx"), p.with_suffix(".json")
    return p.with_name(p.name + ".onnx"), p.with_name(p.name + ".json")


def _read_limited(path: Path, limit: int) -> bytes:
    if not path.is_file():
        raise InvalidSubmission(f"{path} does not exist")
    if path.stat().st_size > limit:
        raise InvalidSubmission(f"{path.name} is {path.stat().st_size:,} bytes, over {limit:,}")
    return path.read_bytes()


def load_onnx_file(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ValidatedOnnx:
    """Validate ``<stem>.onnx`` with the ``<stem>.json`` spec beside it.

    Raises:
        InvalidSubmission: A file is missing or fails validation (prefixed with its name).
    """
    model_path, spec_path = onnx_paths(path)
    data = _read_limited(model_path, max_bytes)
    spec = _read_limited(spec_path, MAX_SPEC_BYTES)
    try:
        return validate_onnx_bytes(data, spec, max_bytes)
    except InvalidSubmission as exc:
        raise InvalidSubmission(f"{model_path.name}: {exc}") from None


def onnx_policy_from_file(
    path: str | os.PathLike,
    device: str = "auto",
    temperature: float = 1.0,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> OnnxPolicy:
    """Validate ``<stem>.onnx`` + ``<stem>.json`` and load it as an :class:`OnnxPolicy`."""
    return OnnxPolicy(
        load_onnx_file(path, max_bytes=max_bytes),
        device=device,
        temperature=temperature,
        time_limit_s=time_limit_s,
    )
