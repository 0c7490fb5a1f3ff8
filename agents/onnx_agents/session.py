"""onnxruntime sessions for untrusted graphs: restricted options, deadlines, a memory cap.

A model reaches this module only after :mod:`agents.onnx_agents.model` accepted it (standard
operators, no external data). What remains is runtime behaviour, bounded here:

* **time**: every ``run`` (and the session load) is armed with a deadline; when it
  passes, ``RunOptions.terminate`` (``SessionOptions.set_load_cancellation_flag``) is
  set and onnxruntime stops at the next node boundary, also inside ``Loop`` bodies, so
  a graph that loops "forever" ends at its deadline and the calling thread is freed.
  :class:`TimedSession.run` then raises :class:`TimeoutError`, which the engine's
  guard scores as a ``timeout`` forfeit for the whole call (no per-row retries).
* **memory**: every session allocates its intermediate tensors from one CPU arena per
  process capped at :data:`MAX_RUN_MEMORY_BYTES` (an onnxruntime environment allocator);
  a graph that asks for more fails that run instead of swapping the host. CUDA
  sessions get the same cap as ``gpu_mem_limit``. Initializers are not in the arena:
  they are bounded by the upload size limit.
* **no extras**: one intra-op thread by default, sequential execution, no custom-op
  libraries, ONNX format only (never the ORT flatbuffer format), constant folding off
  (it would run the graph's constant parts at load time, outside any deadline).

What a deadline cannot stop is one single operator that runs long (e.g. a huge
``MatMul`` on tensors built at run time): onnxruntime checks ``terminate`` between
nodes. That is why Arena uses this module only inside its sandboxed worker processes
(:mod:`agents.onnx_agents.worker`): the parent kills a worker whose run is not back
shortly after its deadline.

This module imports onnxruntime and numpy only (no ``envs``), so a worker starts fast.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort

log = logging.getLogger(__name__)

MAX_RUN_MEMORY_BYTES = 1 << 30
"""Cap of the per-process CPU arena shared by all ONNX sessions (and of each GPU arena)."""
LOAD_LIMIT_S = 10.0
"""Longest a session load (graph resolution and optimization) may take."""
_QUIET = 4  # onnxruntime log level "fatal": its errors come back to us as exceptions


class LoadRefused(Exception):
    """onnxruntime refused a model, or took too long to load it (the message says which)."""


class Deadlines:
    """One daemon thread that calls ``cancel`` for every armed job whose deadline passed.

    One thread for the whole process rather than a ``threading.Timer`` per call: a
    Timer starts a thread per call, which costs about as much as a small batched
    forward pass.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._cancels: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, cancel: Callable[[], None]) -> int:
        """Call ``cancel()`` in ``seconds`` unless :meth:`disarm` comes first; returns a token."""
        with self._cond:
            token = next(self._ids)
            self._cancels[token] = cancel
            due = time.monotonic() + seconds
            # Wake the thread only if it would sleep past this deadline: a run after run
            # with the same limit then costs no thread switch (stale entries of disarmed
            # deadlines are dropped whenever the thread wakes).
            earliest = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, token))
            if self._thread is None or not self._thread.is_alive():  # first use, or after fork
                self._thread = threading.Thread(
                    target=self._serve, name="onnx-deadlines", daemon=True
                )
                self._thread.start()
            if earliest:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Forget ``token``; returns ``True`` if its deadline had already fired."""
        with self._cond:
            return self._cancels.pop(token, None) is None

    def _serve(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and (
                    self._heap[0][1] not in self._cancels or self._heap[0][0] <= now
                ):
                    _, token = heapq.heappop(self._heap)
                    cancel = self._cancels.pop(token, None)
                    if cancel is not None:
                        try:
                            cancel()
                        except Exception:  # this thread must outlive any one cancel
                            log.exception("an onnxruntime cancel callback failed")
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


DEADLINES = Deadlines()
"""The process's deadline thread (started on first use)."""


@functools.cache
def _capped_cpu_arena() -> None:
    """Register, once per process, the capped CPU arena the sessions allocate from."""
    info = ort.OrtMemoryInfo(
        "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
    )
    # (max_mem, extend strategy 1 = grow by what is requested, default chunk sizes)
    config = ort.OrtArenaCfg(MAX_RUN_MEMORY_BYTES, 1, -1, -1)
    try:
        ort.create_and_register_allocator(info, config)
    except Exception as exc:  # noqa: BLE001 - e.g. registered already by another caller
        log.warning("could not register the capped onnxruntime CPU arena: %s", exc)


def providers_for(device: str) -> list[str | tuple[str, dict]]:
    """Execution providers for ``"cpu"``, ``"cuda"``/``"cuda:N"`` or ``"auto"``.

    ``auto`` takes CUDA when onnxruntime reports it (the ``onnxruntime-gpu`` build).

    Raises:
        ValueError: CUDA requested but not available, or an unknown device.
    """
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    device = str(device)
    if device == "auto":
        device = "cuda" if has_cuda else "cpu"
    if device == "cpu":
        return ["CPUExecutionProvider"]
    kind, _, index = device.partition(":")
    if kind != "cuda" or not (index == "" or index.isdigit()):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    if not has_cuda:
        raise ValueError(
            f"device {device!r} requested but onnxruntime has no CUDA provider "
            "(install onnxruntime-gpu); use 'cpu' or 'auto'"
        )
    options = {"device_id": int(index or 0), "gpu_mem_limit": MAX_RUN_MEMORY_BYTES,
               "arena_extend_strategy": "kSameAsRequested"}
    return [("CUDAExecutionProvider", options), "CPUExecutionProvider"]


def _session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = _QUIET
    options.add_session_config_entry("session.load_model_format", "ONNX")
    options.add_session_config_entry("session.use_env_allocators", "1")
    return options


def load_session(
    data: bytes,
    device: str = "cpu",
    *,
    threads: int = 1,
    load_limit_s: float = LOAD_LIMIT_S,
) -> ort.InferenceSession:
    """An onnxruntime session of already validated model bytes.

    Raises:
        LoadRefused: onnxruntime refuses the model, or loading it takes more than
            ``load_limit_s``.
        ValueError: Bad ``device``.
    """
    providers = providers_for(device)
    _capped_cpu_arena()
    options = _session_options(threads)
    token = DEADLINES.arm(load_limit_s, lambda: options.set_load_cancellation_flag(True))
    try:
        session = ort.InferenceSession(
            data, options, providers=providers, disabled_optimizers=["ConstantFolding"]
        )
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
        if DEADLINES.disarm(token):
            raise LoadRefused(
                f"onnxruntime took more than {load_limit_s}s to load the model; simplify it"
            ) from None
        raise LoadRefused(f"onnxruntime cannot load the model: {exc}") from None
    DEADLINES.disarm(token)
    return session


class TimedSession:
    """One session with its input and output names; every run has a deadline.

    A run never starts while an earlier run that passed its deadline is still inside
    one long operator: it waits for that run to return, within its own deadline, and
    otherwise raises :class:`TimeoutError`, so abandoned calls cannot pile up threads
    that each burn a core.
    """

    def __init__(self, session: ort.InferenceSession, input_name: str, output_name: str) -> None:
        self.session = session
        self.input_name = input_name
        self.output_name = output_name
        self._idle = threading.Condition()
        self._overdue = 0  # runs terminated at their deadline that have not returned yet

    def _terminate(self, options: ort.RunOptions) -> None:
        options.terminate = True
        with self._idle:
            self._overdue += 1

    def run(self, obs: np.ndarray, limit_s: float) -> np.ndarray:
        """The output for ``obs`` (float32), terminated after ``limit_s`` seconds.

        Raises:
            TimeoutError: The run was terminated at its deadline, or an earlier
                terminated run has not returned yet.
            Exception: Whatever onnxruntime raised for another failure.
        """
        start = time.perf_counter()
        with self._idle:
            if not self._idle.wait_for(lambda: self._overdue == 0, timeout=limit_s):
                raise TimeoutError(
                    f"an earlier run of this model, terminated at its deadline, was still running "
                    f"after this call waited {limit_s}s"
                )
        options = ort.RunOptions()
        options.log_severity_level = _QUIET
        remaining = max(limit_s - (time.perf_counter() - start), 0.0)
        token = DEADLINES.arm(remaining, lambda: self._terminate(options))
        try:
            (out,) = self.session.run([self.output_name], {self.input_name: obs}, options)
        except Exception as exc:
            if self._finish(token):
                elapsed = time.perf_counter() - start
                raise TimeoutError(
                    f"the ONNX run was terminated at its {limit_s}s deadline ({elapsed:.2f}s)"
                ) from exc
            raise
        self._finish(token)
        return out

    def _finish(self, token: int) -> bool:
        """Disarm the run's deadline; ``True`` (and one overdue run fewer) if it had fired."""
        fired = DEADLINES.disarm(token)
        if fired:
            with self._idle:
                self._overdue -= 1
                self._idle.notify_all()
        return fired
