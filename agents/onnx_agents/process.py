"""One ONNX worker process as its parent sees it: start it, ask it, kill it.

:class:`WorkerProcess` starts ``python -m agents.onnx_agents.worker`` with a minimal
environment (no ``ARENA_*`` settings, no database or Redis URL, one BLAS thread), its own
session (a terminal's Ctrl-C reaches the service, not it), two pipes and a memory
region shared for large batches, all non-blocking on this side. :meth:`request` sends
one frame and waits for the reply until the request's deadline plus a grace; a worker
not back by then is SIGKILLed with its process group (:class:`SandboxTimeout`), one that
dies under the request is reported with its exit status (:class:`SandboxCrashed`). The
pool that leases these processes is :mod:`agents.onnx_agents.sandbox`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.onnx_agents.confine import refusal, resolve_mode
from agents.onnx_agents.wire import Deadline, WireError, recv_frame, send_frame
from agents.policy import PolicyCrashed
from envs.errors import InvalidSubmission, ServiceUnavailable

_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the agents package
_F_SETPIPE_SZ = 1031
_PIPE_BYTES = 1 << 20  # fewer wake-ups for frames that do not use the shared region
SHARED_BYTES = 64 << 20
"""Each worker's region shared with its parent, for batches and logits of 64 KiB and more."""


@dataclass(frozen=True)
class SandboxLimits:
    """What a sandbox's worker processes may use.

    Attributes:
        workers: Most worker processes at once (each holds onnxruntime, ~60 MiB).
        memory_bytes: ``RLIMIT_AS`` of a worker (``None``: unlimited; always for ``gpu``).
        max_sessions: Models one worker keeps loaded (least recently used dropped).
        start_timeout_s: Longest a new worker may take to say hello.
        acquire_timeout_s: Longest a call waits for an idle worker.
        kill_grace_s: How long after a request's deadline its worker is killed (it
            first gets the chance to end the run itself and stay alive).
        gpu: Workers for onnxruntime's CUDA provider (no address-space limit, file
            access allowed: the driver reserves huge mappings and loads libraries).
        confinement: ``required`` or ``best-effort``
            (:func:`agents.onnx_agents.confine.resolve_mode`; ``None``: the
            ``ARENA_ONNX_CONFINEMENT`` of this process's environment, else the kernel's default).
    """

    workers: int = 2
    memory_bytes: int | None = 4 << 30
    max_sessions: int = 16
    start_timeout_s: float = 60.0
    acquire_timeout_s: float = 120.0
    kill_grace_s: float = 0.25
    gpu: bool = False
    confinement: str | None = None


class SandboxCrashed(PolicyCrashed):
    """The worker process died under a request (the message says how)."""


class SandboxTimeout(TimeoutError):
    """The worker was not back by the request's deadline and was killed."""


class SandboxUnavailable(ServiceUnavailable):
    """No worker process could be started or leased: the sandbox failed, not the model."""


class ConfinementRefused(SandboxUnavailable):
    """Workers may not run models here: a layer the operator requires was refused by the kernel."""


class OnnxRunError(RuntimeError):
    """onnxruntime failed on a run (the worker reported its message and lives on)."""


class Missing(Exception):
    """The worker does not hold the model (never loaded there, or dropped)."""


def worker_environment() -> dict[str, str]:
    """A worker's whole environment: no ``ARENA_*`` setting, database or Redis URL."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
            if k in os.environ}
    path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    # ORT_DISABLE_TELEMETRY: onnxruntime 1.32 otherwise opens a SQLite store under the
    # user's cache at import, writable by every worker and read by the next one's import.
    return {**keep, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ORT_DISABLE_TELEMETRY": "1"}


def _shared_region() -> tuple[int | None, mmap.mmap | None]:
    """A memfd of :data:`SHARED_BYTES` and its mapping (``(None, None)`` where unsupported:
    every batch then goes through the pipe)."""
    try:
        fd = os.memfd_create("arena-onnx-batches", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None, None
    try:
        os.ftruncate(fd, SHARED_BYTES)
        return fd, mmap.mmap(fd, SHARED_BYTES)
    except OSError:
        os.close(fd)
        return None, None


def exit_status(code: int | None) -> str:
    """How a process ended, in words (``killed by SIGKILL``, ``exited with status 1``)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"




class WorkerProcess:
    """One worker process and the parent's ends of its two pipes.

    ``module`` is the program it runs (tests start their own, confined the same way).
    """

    def __init__(self, limits: SandboxLimits, module: str = "agents.onnx_agents.worker") -> None:
        try:
            self.mode = resolve_mode(limits.confinement)
        except ValueError as exc:
            raise ConfinementRefused(str(exc)) from None
        req_r, self.req = os.pipe()
        self.resp, resp_w = os.pipe()
        shared_fd, self.shared = _shared_region()
        config = {"memory_bytes": None if limits.gpu else limits.memory_bytes,
                  "gpu": limits.gpu, "max_sessions": limits.max_sessions,
                  "shared_fd": shared_fd, "shared_bytes": SHARED_BYTES, "confinement": self.mode}
        try:
            for fd in (self.req, self.resp):
                with contextlib.suppress(OSError):
                    fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
                os.set_blocking(fd, False)
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-m", module, str(req_r), str(resp_w),
                 json.dumps(config)],
                pass_fds=tuple(fd for fd in (req_r, resp_w, shared_fd) if fd is not None),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env=worker_environment(), cwd="/", start_new_session=True)
        except OSError as exc:
            for fd in (self.req, self.resp):
                os.close(fd)
            raise SandboxUnavailable(f"cannot start an ONNX worker process: {exc}") from None
        finally:
            for fd in (req_r, resp_w, shared_fd):
                if fd is not None:
                    os.close(fd)
        self.hello: dict[str, Any] | None = None
        self.keys: set[str] = set()
        self.busy = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self, timeout_s: float) -> dict[str, Any]:
        """Its hello (read once).

        Raises:
            SandboxUnavailable: It never came.
            ConfinementRefused: The worker lacks a layer its mode requires (it exits).
        """
        if self.hello is None:
            try:
                header, _ = recv_frame(self.resp, time.monotonic() + timeout_s, max_payload=0)
            except WireError as exc:
                self.kill()
                raise SandboxUnavailable(
                    f"an ONNX worker process did not start ({exc}; {exit_status(self.proc.poll())})"
                ) from None
            if header.get("op") != "hello":
                self.kill()
                raise SandboxUnavailable("an ONNX worker process sent no hello")
            # Checked here too, not only by the worker: a missing layer runs no model.
            refused = refusal(header.get("confinement") or {}, self.mode) or header.get("refused")
            if refused:
                self.kill()
                raise ConfinementRefused(str(refused)[:2000])
            self.hello = header
        return self.hello

    def request(self, header: dict[str, Any], payload: Any, limit_s: float, grace_s: float,
                max_payload: int = 0) -> tuple[dict[str, Any], memoryview]:
        """One request and its reply; kills the worker when it overruns or breaks the protocol."""
        deadline = time.monotonic() + limit_s + grace_s
        try:
            send_frame(self.req, deadline, header, payload)
            reply, data = recv_frame(self.resp, deadline, max_payload)
        except Deadline:
            self.kill()
            raise SandboxTimeout(
                f"the ONNX {header['op']} was not back {limit_s}s + {grace_s}s after it started; "
                "its worker process was killed") from None
        except WireError as exc:
            try:  # a closed pipe is a death, seen a moment before the process can be reaped
                code: int | None = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            what = exit_status(code) if code is not None else f"broke the protocol: {exc}"
            raise SandboxCrashed(f"the ONNX worker process running it {what}") from None
        if reply.get("ok"):
            return reply, data
        kind, message = reply.get("kind"), str(reply.get("message", ""))[:2000]
        if kind == "missing":
            raise Missing(message)
        if kind == "timeout":
            raise TimeoutError(message)
        if kind == "refused":
            raise InvalidSubmission(message)
        if kind == "value":
            raise ValueError(message)
        raise OnnxRunError(message)

    def kill(self) -> None:
        """SIGKILL its process group and reap it (idempotent)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def close(self) -> None:
        for fd in (self.req, self.resp):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.shared is not None:
            with contextlib.suppress(BufferError):  # a caller's view still alive: GC frees it
                self.shared.close()


