"""Where match workers run: the GPU share each asks Ray for, and the device it plays on.

Two decisions, kept pure so CI exercises them without a GPU (the suite's Ray cluster
declares logical GPUs on a CPU-only machine):

* :func:`gpus_per_worker`, on the driver: the ``num_gpus`` of every ``MatchWorker``
  (``ARENA_RAY_GPUS_PER_WORKER``; unset shares the cluster's GPUs evenly, at most one
  each, and asks for none where the cluster has none).
* :func:`select_device`, inside each worker: ``cuda`` only where Ray assigned the worker
  a GPU *and* CUDA works in its process; otherwise ``cpu``, with the reason, which the
  worker logs and reports (``arena_workers_on_device`` in ``/metrics``).
  :func:`match_engine` then gives a ``cuda`` worker the device-resident engine.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engines pull in numpy and torch; import them where used
    from arena.engine import MatchEngine

log = logging.getLogger(__name__)


def gpus_per_worker(cluster_gpus: float, num_workers: int, requested: float | None = None) -> float:
    """The GPU share each of ``num_workers`` match workers asks Ray for.

    Args:
        cluster_gpus: ``ray.cluster_resources().get("GPU", 0)``.
        num_workers: Workers about to start.
        requested: ``ARENA_RAY_GPUS_PER_WORKER``; ``None``: the cluster's GPUs shared
            evenly, at most one per worker; ``0``: CPU workers even on a GPU cluster.

    Returns:
        ``0.0`` where the cluster has no GPU (a worker asking for one would never be
        scheduled; a request is then logged and ignored), else the share.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    if cluster_gpus <= 0:
        if requested:
            log.warning("ARENA_RAY_GPUS_PER_WORKER=%s, but the Ray cluster has no GPU resources; "
                        "match workers play on CPU", requested)
        return 0.0
    if requested is None:
        return min(1.0, cluster_gpus / num_workers)
    if requested * num_workers > cluster_gpus:
        log.warning("%d match workers x %s GPU exceed the cluster's %s GPUs; some workers wait "
                    "for a GPU to become free", num_workers, requested, cluster_gpus)
    return float(requested)


def select_device(gpu_ids: Sequence[object], cuda_available: bool) -> tuple[str, str]:
    """The device a worker plays on, and why.

    Args:
        gpu_ids: ``ray.get_gpu_ids()`` in the worker (empty: Ray assigned no GPU).
        cuda_available: ``torch.cuda.is_available()`` in the worker's process.

    Returns:
        ``("cuda", reason)`` or ``("cpu", reason)``.
    """
    if not gpu_ids:
        return "cpu", "no GPU assigned by Ray"
    ids = ", ".join(map(str, gpu_ids))
    if not cuda_available:
        return "cpu", f"Ray assigned GPU {ids} but CUDA is not available in this process; falling back to CPU"
    return "cuda", f"Ray assigned GPU {ids}"


def match_engine(device: str) -> MatchEngine:
    """The engine a worker on ``device`` plays with: the device-resident engine on
    ``cuda`` (built-in board games stay on the GPU; anything else falls back to the CPU
    path by itself), the numpy engine on ``cpu`` (faster there; see docs/gpu.md)."""
    if device == "cuda":
        from arena.engine.device import DeviceMatchEngine

        return DeviceMatchEngine("cuda")
    from arena.engine import MatchEngine

    return MatchEngine()
