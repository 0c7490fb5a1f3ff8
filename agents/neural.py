"""NeuralPolicy: a checkpointed network behind the batched Policy interface.

One ``act`` call is one batched forward pass under ``torch.inference_mode()``; illegal
actions are masked out, then an action is sampled with the Gumbel-max trick using the
per-row streams of :class:`~agents.policy.MatchRng` (``argmax(logits / T + g)`` samples
``softmax(logits / T)``), so a row draws the same action alone or inside any batch.
``temperature == 0`` is greedy argmax and draws nothing.

What is and is not batch invariant: the random draws of a row are exactly the same in
any batch; its logits are equal only up to float rounding (~1e-7 relative), because
matrix and conv kernels (oneDNN on CPU, cuBLAS/cuDNN on GPU) pick different reduction
orders for different batch sizes. So a row alone and inside a batch choose the same
action unless its two best masked scores tie within that rounding. Zero-padding
batches to a fixed multiple did not remove this on every CPU (measured on two x86
machines) nor at all on CUDA, so it is not done; match records store the actions,
which is what makes a match replayable.

A row whose logits contain NaN or inf answers ``np.nan`` (the whole answer is then a
float64 array) so the engine can score that decision as ``invalid_output`` instead of
silently playing action 0.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from agents.checkpoint import LoadedCheckpoint, check_state_dict, load_checkpoint, save_checkpoint, serialize_weights
from agents.checkpoint_spec import CheckpointSpec, make_spec, validate_spec
from agents.checkpoint_weights import DEFAULT_MAX_BYTES
from agents.nets import build_net
from agents.policy import MatchRng

log = logging.getLogger(__name__)


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"``, ``"cuda"``/``"cuda:N"``, or ``"auto"`` (cuda when available).

    Raises:
        ValueError: cuda requested but not available, or an unknown device kind.
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available; use 'cpu'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {str(device)!r}")
    return dev


class NeuralPolicy:
    """A frozen network answering batches of decisions.

    Args:
        checkpoint: A validated checkpoint (see :func:`agents.checkpoint.load_checkpoint`).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``; chosen at run time, not in the file.
        temperature: Softmax temperature for sampling; ``0`` means greedy argmax.

    Attributes:
        agent_id: ``f"{arch}-{sha256[:16]}"``.
        weights_hash: Full sha256 hex of the canonical weights bytes.
        spec: The checkpoint spec (env, role, arch, hparams, ...).
    """

    bounded_runtime = True  # one forward pass of a registry architecture of bounded size


    def __init__(
        self,
        checkpoint: LoadedCheckpoint,
        device: str | torch.device = "cpu",
        temperature: float = 1.0,
    ) -> None:
        if not (
            isinstance(temperature, (int, float))
            and math.isfinite(temperature)
            and temperature >= 0
        ):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        self.spec: CheckpointSpec = checkpoint.spec
        self.weights_hash: str | None = checkpoint.sha256
        self.agent_id: str = f"{self.spec.arch}-{checkpoint.sha256[:16]}"
        self.temperature = float(temperature)
        self.device = resolve_device(device)
        net = build_net(
            self.spec.arch, self.spec.hparams, self.spec.obs_shape, self.spec.num_actions
        )
        net.load_state_dict(checkpoint.state_dict, strict=True)
        self._net = net.to(self.device).eval().requires_grad_(False)

    @classmethod
    def from_module(
        cls,
        module: nn.Module,
        spec: CheckpointSpec | Mapping[str, Any],
        device: str | torch.device = "cpu",
        temperature: float = 1.0,
    ) -> NeuralPolicy:
        """Snapshot a live (training) module: weights are COPIED, never aliased.

        Non-finite weights are allowed here (a diverged learner must still be playable
        so its NaN outputs are recorded as ``invalid_output``); shapes must match.
        The hash equals that of the checkpoint :func:`save_checkpoint` would write.
        """
        spec = validate_spec(spec)
        state_dict = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
        check_state_dict(spec, state_dict, require_finite=False)
        sha = hashlib.sha256(serialize_weights(state_dict)).hexdigest()
        return cls(
            LoadedCheckpoint(spec=spec, state_dict=state_dict, sha256=sha),
            device=device,
            temperature=temperature,
        )

    def __repr__(self) -> str:
        return (
            f"NeuralPolicy({self.agent_id!r}, env={self.spec.env!r}, role={self.spec.role!r}, "
            f"device={str(self.device)!r}, temperature={self.temperature})"
        )

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """Raw float64 logits ``(k, num_actions)`` of one batched forward pass."""
        obs = np.asarray(obs)
        if obs.shape[1:] != self.spec.obs_shape:
            raise ValueError(
                f"{self.agent_id} expects observations (k, {', '.join(map(str, self.spec.obs_shape))}),"
                f" got {obs.shape}"
            )
        with torch.inference_mode():
            x = torch.as_tensor(obs, device=self.device).to(torch.float32)
            out = self._net(x)
        return out.to("cpu", torch.float64).numpy()

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        """Sample one legal action per row (:func:`sample_masked` over this net's logits).

        Args:
            obs: ``(k, *obs_shape)`` observations (any numeric dtype).
            mask: ``(k, num_actions)`` legal-action mask.
            rng: One random stream per row.

        Returns:
            ``(k,)`` int64 actions (``-1`` for a row with no legal action), or float64
            with ``np.nan`` in rows whose logits were not finite.
        """
        return sample_masked(self, obs, mask, rng)


class LogitsPolicy(Protocol):
    """What :func:`sample_masked` needs of a policy: its logits, shapes and temperature."""

    spec: CheckpointSpec
    temperature: float
    agent_id: str

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(k, num_actions)`` logits of one batched forward pass."""
        ...


def sample_masked(
    policy: LogitsPolicy, obs: np.ndarray, mask: np.ndarray, rng: MatchRng
) -> np.ndarray:
    """One legal action per row, sampled from ``policy``'s masked logits of the batch.

    The one sampling rule of every logits policy (:class:`NeuralPolicy`, the ONNX
    policy), so a network exported to another runtime keeps choosing the same moves:
    Gumbel-max over ``logits / temperature`` with the rows' own streams, greedy
    argmax at ``temperature == 0``.

    Args:
        policy: Gives the logits, ``spec.num_actions``, ``temperature`` and ``agent_id``.
        obs: ``(k, *obs_shape)`` observations.
        mask: ``(k, num_actions)`` legal-action mask.
        rng: One random stream per row.

    Returns:
        ``(k,)`` int64 actions (``-1`` for a row with no legal action), or float64
        with ``np.nan`` in rows whose logits were not finite (``invalid_output``).

    Raises:
        ValueError: Rows of ``obs``, ``mask`` and ``rng`` disagree, or a mask of the
            wrong width.
    """
    mask = np.asarray(mask, dtype=bool)
    k, n = len(mask), policy.spec.num_actions
    if mask.shape != (k, n) or len(obs) != k or len(rng) != k:
        raise ValueError(
            f"act got {len(obs)} observations, mask {mask.shape} and {len(rng)} rng rows; "
            f"expected k rows each and mask (k, {n})"
        )
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    logits = policy.logits(obs)
    broken = ~np.isfinite(logits).all(axis=1)
    temperature = policy.temperature
    with np.errstate(invalid="ignore", over="ignore"):  # broken rows are replaced below
        scores = logits / temperature + rng.gumbel(n) if temperature > 0 else logits
        actions = np.where(mask, scores, -np.inf).argmax(axis=1)
    actions = np.where(mask.any(axis=1), actions, -1).astype(np.int64)
    if broken.any():
        log.debug("%s: %d of %d rows have non-finite logits", policy.agent_id, broken.sum(), k)
        out = actions.astype(np.float64)
        out[broken] = np.nan
        return out
    return actions


def policy_from_file(
    path: str | os.PathLike,
    device: str | torch.device = "cpu",
    temperature: float = 1.0,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> NeuralPolicy:
    """Load and validate ``<stem>.safetensors`` + ``<stem>.json`` into a NeuralPolicy.

    Raises:
        InvalidSubmission: The checkpoint fails validation.
    """
    return NeuralPolicy(
        load_checkpoint(path, max_bytes=max_bytes), device=device, temperature=temperature
    )


_INIT_LOCK = threading.Lock()  # random_init_checkpoint: one seeded initialization at a time


def random_init_checkpoint(
    env_id: str,
    arch: str,
    hparams: Mapping[str, Any] | None = None,
    seed: int = 0,
    role: str | None = None,
    name: str | None = None,
) -> tuple[dict[str, torch.Tensor], CheckpointSpec]:
    """Weights of a freshly initialized network, deterministic in ``seed``.

    The global torch RNG is left untouched (initialization runs in a forked RNG) and
    threads may call this at once (they take turns: the forked RNG is still the
    process's one, so two seeds set at once would give both the same weights).

    Args:
        env_id: Registered env id.
        arch: Architecture name (see :data:`agents.archs.ARCHS`).
        hparams: Hyper-parameters; defaults when omitted.
        seed: Initialization seed.
        role: Team role to play; may be omitted when the env has a single role.
        name: Optional display name stored in the spec.

    Returns:
        ``(state_dict, spec)`` ready for :func:`agents.checkpoint.save_checkpoint`.
    """
    spec = make_spec(env_id, arch, hparams, role=role, name=name)
    with _INIT_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}, spec


def write_checkpoint(
    path: str | os.PathLike,
    env_id: str,
    arch: str,
    hparams: Mapping[str, Any] | None = None,
    seed: int = 0,
    role: str | None = None,
    name: str | None = None,
) -> LoadedCheckpoint:
    """Create a randomly initialized agent on disk (``arena agent init``) and read it back.

    Returns:
        The checkpoint as loaded through the full validator (its ``sha256`` is the agent id).
    """
    state_dict, spec = random_init_checkpoint(env_id, arch, hparams, seed, role=role, name=name)
    weights_path = save_checkpoint(state_dict, spec, path)
    return load_checkpoint(weights_path)
