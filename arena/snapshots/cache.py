"""SnapshotCache: the policies one worker holds, loaded on demand, bounded.

A worker never loads a whole league: it asks the cache for the snapshots its current
matches need. The cache fetches missing ones from a :class:`SnapshotSource` (the
:class:`~arena.snapshots.pool.RedisSnapshotPool`), checks them against their hash,
validates them (:mod:`arena.snapshots.formats`: the full checkpoint validator for
safetensors weights, the static checks for an ONNX model), builds their policy on the
worker's device (a :class:`~agents.neural.NeuralPolicy`, or an
:class:`~agents.onnx_agents.policy.OnnxPolicy` whose runs end at the engine's time
budget) and keeps at most ``capacity`` of them, evicting the least recently used.
Memory is therefore bounded by ``capacity``, whatever the size of the pool.

:func:`snapshot_policy` is where pooled bytes become a network, so this module imports
torch: the processes that play matches (the background service, Ray workers, CLI
commands) import it, an API process never does.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from agents.checkpoint import load_checkpoint_bytes
from agents.checkpoint_spec import CheckpointSpec
from agents.checkpoint_weights import DEFAULT_MAX_BYTES
from agents.neural import NeuralPolicy
from agents.policy import MatchRng
from arena.core.lru import BuildingLru
from arena.engine import DEFAULT_TIME_BUDGET_S
from arena.snapshots.formats import SpecLike, snapshot_format, spec_json
from arena.snapshots.keys import check_sha256
from arena.snapshots.pool import SnapshotCorrupt

if TYPE_CHECKING:
    from agents.onnx_agents.policy import OnnxPolicy

log = logging.getLogger(__name__)

__all__ = ["CacheStats", "SnapshotCache", "SnapshotPolicy", "SnapshotSource", "load_snapshot_policy", "onnx_device",
           "snapshot_policy"]


class SnapshotSource(Protocol):
    """Anything that returns a snapshot's weights and spec by sha256."""

    def get(self, sha256: str) -> tuple[bytes, CheckpointSpec]:
        """``(weights, spec)`` of the snapshot."""
        ...


@dataclass(frozen=True)
class CacheStats:
    """Counters of a :class:`SnapshotCache` (since creation or :meth:`SnapshotCache.clear`)."""

    hits: int
    misses: int
    evictions: int
    size: int
    capacity: int


class SnapshotCache:
    """Bounded LRU of loaded snapshot policies (thread-safe).

    Args:
        source: Where snapshots are fetched from on a miss.
        capacity: Most policies held at once (``settings.snapshot_cache_size``).
        device: Device the policies run on (``"cpu"``, ``"cuda"``, ``"auto"``).
        temperature: Sampling temperature of the built policies.
        max_bytes: Largest accepted weights.
        time_limit_s: Deadline of one call of an ONNX policy: the time budget of the
            engine that plays them (a run past it is terminated: a ``timeout`` forfeit).
    """

    def __init__(
        self,
        source: SnapshotSource,
        capacity: int = 32,
        device: str | torch.device = "cpu",
        temperature: float = 1.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        time_limit_s: float = DEFAULT_TIME_BUDGET_S,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"cache capacity must be at least 1, got {capacity}")
        self.source = source
        self.device = device
        self.temperature = temperature
        self.max_bytes = max_bytes
        self.time_limit_s = time_limit_s
        self._policies: BuildingLru[str, NeuralPolicy | OnnxPolicy] = BuildingLru(
            capacity, on_evict=lambda sha256: log.debug("evicted snapshot %s", sha256[:16]))

    @property
    def capacity(self) -> int:
        return self._policies.capacity

    def __len__(self) -> int:
        return len(self._policies)

    def __contains__(self, sha256: object) -> bool:
        return sha256 in self._policies

    def __repr__(self) -> str:
        return f"SnapshotCache({len(self)}/{self.capacity}, device={str(self.device)!r})"

    @property
    def stats(self) -> CacheStats:
        """Current hit/miss/eviction counters and size."""
        return CacheStats(*self._policies.counts(), self.capacity)

    def get(self, sha256: str) -> NeuralPolicy | OnnxPolicy:
        """The policy of a snapshot, loading it on a miss.

        Raises:
            SnapshotNotFound: The source has no such snapshot.
            SnapshotCorrupt: The fetched bytes do not hash to ``sha256``.
            InvalidSubmission: The bytes fail checkpoint validation.
        """
        check_sha256(sha256)
        return self._policies.get(sha256, lambda: self._load(sha256))

    def clear(self) -> None:
        """Drop every policy and reset the counters."""
        self._policies.clear()

    def _load(self, sha256: str) -> NeuralPolicy | OnnxPolicy:
        policy = load_snapshot_policy(
            self.source, sha256, self.device, self.temperature, max_bytes=self.max_bytes,
            time_limit_s=self.time_limit_s,
        )
        log.debug("loaded snapshot %s on %s", sha256[:16], self.device)
        return policy


def load_snapshot_policy(
    source: SnapshotSource,
    sha256: str,
    device: str | torch.device = "cpu",
    temperature: float = 1.0,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    time_limit_s: float = DEFAULT_TIME_BUDGET_S,
) -> NeuralPolicy | OnnxPolicy:
    """Fetch one snapshot, validate it and build its policy (no caching).

    The one way pooled bytes become a policy (workers' caches, the service's
    validation episodes, challenges): safetensors weights become a
    :class:`~agents.neural.NeuralPolicy`, an ONNX model an
    :class:`~agents.onnx_agents.policy.OnnxPolicy` with ``time_limit_s`` per call.

    Matches ``arena.runners.SnapshotLoader`` as
    ``functools.partial(load_snapshot_policy, pool)`` called with ``(sha256, device)``.

    Raises:
        SnapshotNotFound: The source has no such snapshot.
        SnapshotCorrupt: The fetched bytes do not hash to ``sha256``.
        InvalidSubmission: The bytes fail checkpoint validation.
    """
    weights, spec = source.get(check_sha256(sha256))
    served = hashlib.sha256(weights).hexdigest()
    if served != sha256:
        raise SnapshotCorrupt(
            f"snapshot {sha256} was served with bytes hashing to {served}; refusing to load it"
        )
    return snapshot_policy(weights, spec, device=device, temperature=temperature,
                           time_limit_s=time_limit_s, max_bytes=max_bytes)


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
    """The policy of stored snapshot bytes (checked as :func:`~arena.snapshots.formats.verify_snapshot` does).

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
    checkpoint = load_checkpoint_bytes(weights, spec_json(spec), max_bytes=max_bytes)
    return NeuralPolicy(checkpoint, device=device, temperature=temperature)


class SnapshotPolicy:
    """A snapshot as a :class:`~agents.policy.Policy` that is looked up in a cache at every call.

    Holding thousands of these costs nothing: the weights live in the bounded cache and
    are (re)loaded only when a batch actually needs them.
    """

    bounded_runtime = True

    def __init__(self, cache: SnapshotCache, sha256: str) -> None:
        self.cache, self.weights_hash = cache, check_sha256(sha256)
        self.agent_id = f"snapshot-{sha256[:16]}"

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        """The cached policy's actions (loading the snapshot on a miss)."""
        return self.cache.get(self.weights_hash).act(obs, mask, rng)
