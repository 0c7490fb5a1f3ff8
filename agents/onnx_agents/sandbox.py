"""A pool of sandboxed ONNX worker processes: user graphs never run in Arena's own process.

:class:`OnnxSandbox` keeps up to ``workers`` long-lived processes of
:mod:`agents.onnx_agents.worker` (started on demand: importing onnxruntime costs about
half a second, paid once per worker, not per call). A caller leases an idle worker
(preferably one that has the model loaded already), sends it a request and waits for
the reply until the request's deadline plus a short grace (``kill_grace_s``). A worker
that is not back by then is SIGKILLed (its whole process group), which also stops one
long operator that onnxruntime's own ``terminate`` cannot interrupt. A worker that dies
under a request (a native crash, the kernel's CPU-time limit, the SIGKILL) costs that
request only: the caller gets :class:`SandboxCrashed` or :class:`SandboxTimeout`, and a
replacement starts at once. If no worker can be started at all the caller gets
:class:`SandboxUnavailable` (HTTP 503): the sandbox itself failed, not the model. A
worker that lacks a confinement layer its mode requires runs nothing and is not
replaced: every later lease raises :class:`ConfinementRefused` (a 503 too) at once.
One process is driven by :class:`~agents.onnx_agents.process.WorkerProcess`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.onnx_agents.confine import MODE_VARIABLE, refusal, resolve_mode
from agents.onnx_agents.process import (
    ConfinementRefused,
    Missing,
    SandboxCrashed,
    SandboxLimits,
    SandboxUnavailable,
    WorkerProcess,
    exit_status,
    worker_environment,
)
from agents.onnx_agents.wire import SHARED_MIN_BYTES, WireError, array_of, put_shared, shared_array

__all__ = ["Lease", "OnnxSandbox", "SandboxedModel", "confinement_report", "default_sandbox", "validation_sandbox"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxedModel:
    """What a worker needs to load a model: its bytes, names and where it runs."""

    key: str
    data: bytes = field(repr=False)
    input_name: str
    output_name: str
    device: str = "cpu"
    threads: int = 1



class Lease:
    """One worker held by one caller: its requests never interleave with anyone's."""

    def __init__(self, sandbox: OnnxSandbox, worker: WorkerProcess) -> None:
        self._sandbox, self._worker = sandbox, worker
        self._grace = sandbox.limits.kill_grace_s

    @property
    def pid(self) -> int:
        return self._worker.pid

    @property
    def alive(self) -> bool:
        """Whether its worker process still runs (not killed or crashed under a request)."""
        return self._worker.proc.poll() is None

    def check(self, data: bytes, limit_s: float) -> None:
        """``onnx.checker`` on ``data``; :class:`InvalidSubmission` with its complaint."""
        self._worker.request({"op": "check", "limit_s": limit_s}, data, limit_s, self._grace)

    def load(self, model: SandboxedModel, limit_s: float) -> list[str]:
        """Load ``model`` (a no-op where it is loaded); returns its session's providers."""
        header = {"op": "load", "key": model.key, "device": model.device, "threads": model.threads,
                  "input": model.input_name, "output": model.output_name, "limit_s": limit_s}
        reply, _ = self._worker.request(header, model.data, limit_s, self._grace)
        self._worker.keys.add(model.key)
        return [str(p) for p in reply.get("providers", [])]

    def run(self, model: SandboxedModel, obs: np.ndarray, limit_s: float, columns: int,
            load_limit_s: float) -> np.ndarray:
        """The model's output for ``obs``: at most ``columns`` float64-sized values per row."""
        header: dict[str, Any] = {"op": "run", "key": model.key, "limit_s": limit_s,
                                  "threads": model.threads}
        payload: Any = obs
        shared = self._worker.shared
        if shared is not None and obs.nbytes >= SHARED_MIN_BYTES:
            spec = put_shared(shared, obs)
            if spec is not None:  # one wake-up each way, however large the batch
                header["shared"], payload = spec, b""
        most = len(obs) * columns * 8
        try:
            reply, data = self._worker.request(header, payload, limit_s, self._grace, most)
        except Missing:
            self._worker.keys.discard(model.key)
            self.load(model, load_limit_s)
            if "shared" in header:  # the load did not touch the region, but be exact
                put_shared(shared, obs)
            reply, data = self._worker.request(header, payload, limit_s, self._grace, most)
        try:
            if "shared" in reply and shared is not None:
                out = shared_array(reply["shared"], shared)
                if out.nbytes > most:
                    raise WireError(f"{out.nbytes} bytes of output where at most {most} were expected")
                return out.copy()  # the region is the next call's
            return array_of(reply, data)
        except WireError as exc:
            self._worker.kill()
            raise SandboxCrashed(f"the ONNX worker process broke the protocol: {exc}") from None

    def drop(self, key: str) -> None:
        """Forget a model in this worker."""
        self._worker.keys.discard(key)
        self._worker.request({"op": "drop", "key": key}, b"", 10.0, self._grace)


class OnnxSandbox:
    """Up to ``limits.workers`` confined worker processes, leased one call at a time.

    Thread-safe. Not inherited across ``fork``: a forked child starts its own workers.
    """

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._cond = threading.Condition()
        self._workers: list[WorkerProcess] = []
        self._owner = os.getpid()
        self._closed = False
        self._reported: dict[str, Any] | None = None
        self._refused: str | None = None  # a required layer the kernel refused: final
        self.replaced = 0
        atexit.register(self.close)

    def __repr__(self) -> str:
        return f"OnnxSandbox({len(self._workers)}/{self.limits.workers} workers)"

    def pids(self, *, busy: bool | None = None) -> list[int]:
        """The worker processes' pids (only busy or only idle ones if ``busy`` says so)."""
        with self._cond:
            return [w.pid for w in self._workers if busy is None or w.busy == busy]

    def confinement(self) -> dict[str, Any] | None:
        """What the last worker that said hello reported (``None`` before any did)."""
        with self._cond:
            return dict(self._reported) if self._reported is not None else None

    @property
    def refused(self) -> str | None:
        """Why its workers run no model (a required layer refused), else ``None``."""
        return self._refused

    def hello(self) -> dict[str, Any]:
        """A worker's hello: onnxruntime version, providers, what the confinement did."""
        with self.lease() as lease:
            return dict(lease._worker.hello or {})

    @contextlib.contextmanager
    def lease(self, key: str | None = None, wait_s: float | None = None) -> Iterator[Lease]:
        """Hold an idle, started worker (one with ``key`` loaded where possible).

        Args:
            key: The model the caller will run.
            wait_s: Longest wait for an idle worker (default ``limits.acquire_timeout_s``).

        Raises:
            SandboxUnavailable: No worker could be started, or none became idle in time.
            ConfinementRefused: Workers lack a confinement layer the mode requires.
        """
        worker = self._acquire(key, self.limits.acquire_timeout_s if wait_s is None else wait_s)
        try:
            try:
                hello = worker.ready(self.limits.start_timeout_s)
            except ConfinementRefused as exc:
                with self._cond:
                    if self._refused is None:
                        log.error("%s", exc)
                    self._refused = str(exc)
                raise
            self._report(hello)
            yield Lease(self, worker)
        finally:
            self._release(worker)

    def _acquire(self, key: str | None, wait_s: float) -> WorkerProcess:
        deadline = time.monotonic() + wait_s
        with self._cond:
            if self._owner != os.getpid():  # forked: those workers belong to the parent
                self._workers, self._owner = [], os.getpid()
            while True:
                if self._closed:
                    raise SandboxUnavailable("the ONNX sandbox is closed")
                if self._refused is not None:
                    raise ConfinementRefused(self._refused)
                idle = [w for w in self._workers if not w.busy and w.proc.poll() is None]
                for w in [w for w in self._workers if not w.busy and w not in idle]:
                    self._discard(w, replace=False)  # died while idle: nobody's fault
                if idle:
                    worker = min(idle, key=lambda w: (key not in w.keys, w.hello is None, len(w.keys)))
                elif len(self._workers) < self.limits.workers:
                    worker = WorkerProcess(self.limits)
                    self._workers.append(worker)
                elif not self._cond.wait(deadline - time.monotonic()):
                    raise SandboxUnavailable(
                        f"all {self.limits.workers} ONNX worker processes stayed busy for "
                        f"{wait_s}s; try again later")
                else:
                    continue
                worker.busy = True
                return worker

    def _release(self, worker: WorkerProcess) -> None:
        with self._cond:
            worker.busy = False
            if worker.proc.poll() is not None:
                if self._refused is not None:  # it ran nothing: no replacement would either
                    self._discard(worker, replace=False)
                    self._cond.notify_all()
                    return
                self.replaced += 1
                log.warning("ONNX worker process %d %s; %s", worker.pid,
                            exit_status(worker.proc.returncode),
                            "starting a replacement" if not self._closed else "sandbox closed")
                self._discard(worker, replace=not self._closed)
            self._cond.notify_all()

    def _discard(self, worker: WorkerProcess, *, replace: bool) -> None:
        worker.kill()
        worker.close()
        self._workers.remove(worker)
        if replace:
            try:  # started now, so its imports run while nobody waits for it
                self._workers.append(WorkerProcess(self.limits))
            except SandboxUnavailable as exc:
                log.error("%s", exc)

    def _report(self, hello: dict[str, Any]) -> None:
        confinement = {"mode": hello.get("mode"), "layers": hello.get("confinement", {})}
        with self._cond:
            if confinement == self._reported:
                return
            self._reported = confinement
        layers = confinement["layers"]
        text = "; ".join(f"{k}: {v.get('detail')}" for k, v in layers.items())
        degraded = not all(v.get("active") for v in layers.values())
        log.log(logging.WARNING if degraded else logging.INFO,
                "ONNX sandbox (onnxruntime %s, pid %s, %s): %s", hello.get("onnxruntime"),
                hello.get("pid"), confinement["mode"], text)

    def close(self) -> None:
        """Kill every worker; later leases raise :class:`SandboxUnavailable`."""
        with self._cond:
            self._closed = True
            mine = self._owner == os.getpid()
            for worker in list(self._workers):
                if mine:
                    worker.kill()
                worker.close()
            self._workers.clear()
            self._cond.notify_all()


@functools.cache
def _sandboxes(pid: int, purpose: str, gpu: bool, confinement: str) -> OnnxSandbox:
    return OnnxSandbox(SandboxLimits(gpu=gpu, confinement=confinement))


def default_sandbox(gpu: bool = False, confinement: str | None = None) -> OnnxSandbox:
    """This process's sandbox for play (CPU workers, or CUDA ones), created on first use.

    ``confinement``: ``required`` or ``best-effort``; ``None`` resolves it from the
    environment (:func:`agents.onnx_agents.confine.resolve_mode`), so that every process
    that plays (Ray workers, probes, ``arena.gym``) applies the operator's setting.
    """
    return _sandboxes(os.getpid(), "play", gpu, resolve_mode(confinement))


def validation_sandbox(confinement: str | None = None) -> OnnxSandbox:
    """This process's sandbox for validating submissions, apart from the one that plays:
    slow uploads (up to a checker, a load and two probes each) never hold the workers a
    match is waiting for."""
    return _sandboxes(os.getpid(), "validation", False, resolve_mode(confinement))


@functools.cache
def _confinement_probe(pid: int, mode: str) -> dict[str, Any]:
    env = {**worker_environment(), MODE_VARIABLE: mode}
    try:
        done = subprocess.run([sys.executable, "-s", "-m", "agents.onnx_agents.confine"], env=env,
                              cwd="/", capture_output=True, text=True, timeout=30, check=False)
        return json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"mode": mode, "layers": {}, "refused": f"the confinement could not be checked: {exc}"}


def confinement_report(confinement: str | None = None) -> dict[str, Any]:
    """What confinement this process's ONNX workers get: ``{"mode", "layers", "refused"}``.

    The validation sandbox's workers' own report once one has said hello (or its refusal),
    else that of a throwaway process confined the same way
    (``python -m agents.onnx_agents.confine``, run once per process and mode: it imports
    no onnxruntime, so it costs some tens of milliseconds), so that a health check never
    waits for a worker.
    """
    mode = resolve_mode(confinement)
    sandbox = validation_sandbox(mode)
    seen = sandbox.confinement()
    if seen is not None:
        return {**seen, "refused": refusal(seen["layers"], mode)}
    report = _confinement_probe(os.getpid(), mode)
    if sandbox.refused is not None:
        report = {**report, "refused": sandbox.refused}
    return report
