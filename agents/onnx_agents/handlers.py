"""What an ONNX worker does with a request: check, load, run, drop (onnxruntime lives here).

Imported by :mod:`agents.onnx_agents.worker` once the worker is in its own network
namespace (importing onnxruntime starts a thread, and a process enters a user namespace
only while it has one) and before the rest of its confinement:

* ``check``: ``onnx.checker`` on the model bytes;
* ``load``: an onnxruntime session (:func:`agents.onnx_agents.session.load_session`)
  kept under the request's ``key``, at most ``max_sessions`` of them (least recently
  used dropped first);
* ``run``: the session's output for the observations in the payload (or, for a large
  batch, in the memory region shared with the parent: read in place, and large logits
  written back there), terminated at the request's deadline
  (:class:`agents.onnx_agents.session.TimedSession`);
* ``drop``: forget a session.

Every request first moves the worker's ``RLIMIT_CPU`` to what that request may use,
so a run that keeps a core busy past it is killed by the kernel even if its parent
is gone. A failure is a reply (``{"ok": false, "kind": ..., "message": ...}``), not an
exit.
"""

from __future__ import annotations

import mmap
from collections import OrderedDict
from typing import Any

import numpy as np
import onnx
import onnx.checker
import onnxruntime as ort
from google.protobuf.message import DecodeError
from onnxruntime.capi import onnxruntime_pybind11_state

from agents.onnx_agents.confine import limit_cpu
from agents.onnx_agents.session import LoadRefused, TimedSession, load_session
from agents.onnx_agents.wire import SHARED_MIN_BYTES, WireError, array_of, put_shared, shared_array

ONNXRUNTIME_VERSION = ort.__version__


def available_providers() -> list[str]:
    """onnxruntime's execution providers in this build."""
    return list(ort.get_available_providers())


Reply = tuple[dict[str, Any], Any]
_MESSAGE_CHARS = 2000
_COMMON = (ValueError, TypeError, RuntimeError, MemoryError)
RUN_ERRORS = _COMMON + tuple(  # onnxruntime's pybind exceptions derive from Exception only
    v for v in vars(onnxruntime_pybind11_state).values()
    if isinstance(v, type) and issubclass(v, Exception))
"""What a run may raise and the worker answers (anything else ends the process: a crash)."""
CHECKER_ERRORS = (*_COMMON, onnx.checker.ValidationError, DecodeError)


def _failure(kind: str, message: object) -> Reply:
    return {"ok": False, "kind": kind, "message": str(message)[:_MESSAGE_CHARS]}, b""


class Worker:
    """The sessions of one worker process and its request handlers."""

    def __init__(self, max_sessions: int, shared: mmap.mmap | None = None) -> None:
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[str, TimedSession] = OrderedDict()
        self.shared = shared  # the region large batches and their logits travel through

    def handle(self, header: dict[str, Any], payload: bytearray) -> Reply:
        """Answer one request (never raises for what the model does)."""
        op = header.get("op")
        limit_s = float(header.get("limit_s", 10.0))
        limit_cpu(limit_s * max(1, int(header.get("threads", 1))) + 1.0)
        try:
            if op == "check":
                return self._check(payload)
            if op == "load":
                return self._load(header, payload, limit_s)
            if op == "run":
                return self._run(header, payload, limit_s)
            if op == "drop":
                self.sessions.pop(str(header.get("key")), None)
                return {"ok": True}, b""
        except WireError as exc:
            return _failure("error", exc)
        return _failure("error", f"unknown request {str(op)[:40]!r}")

    @staticmethod
    def _check(payload: bytearray) -> Reply:
        try:
            onnx.checker.check_model(bytes(payload))
        except CHECKER_ERRORS as exc:
            return _failure("refused", f"the ONNX checker refused the model: {exc}")
        return {"ok": True}, b""

    def _load(self, header: dict[str, Any], payload: bytearray, limit_s: float) -> Reply:
        key = str(header["key"])
        session = self.sessions.get(key)
        if session is None:
            try:
                loaded = load_session(bytes(payload), str(header["device"]),
                                      threads=int(header["threads"]), load_limit_s=limit_s)
            except LoadRefused as exc:
                return _failure("refused", exc)
            except ValueError as exc:  # a bad device name
                return _failure("value", exc)
            session = TimedSession(loaded, str(header["input"]), str(header["output"]))
            self.sessions[key] = session
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        self.sessions.move_to_end(key)
        return {"ok": True, "providers": session.session.get_providers()}, b""

    def _run(self, header: dict[str, Any], payload: bytearray, limit_s: float) -> Reply:
        session = self.sessions.get(str(header["key"]))
        if session is None:
            return _failure("missing", "not loaded in this worker")
        self.sessions.move_to_end(str(header["key"]))
        if "shared" in header and self.shared is not None:
            obs = shared_array(header["shared"], self.shared)  # read in place, no copy
        else:
            obs = array_of(header, payload)
        try:
            out = np.ascontiguousarray(session.run(np.ascontiguousarray(obs, dtype=np.float32), limit_s))
        except TimeoutError as exc:
            return _failure("timeout", exc)
        except RUN_ERRORS as exc:
            return _failure("error", exc)
        if self.shared is not None and out.nbytes >= SHARED_MIN_BYTES:
            spec = put_shared(self.shared, out)  # the batch is no longer needed: overwrite it
            if spec is not None:
                return {"ok": True, "shared": spec}, b""
        return {"ok": True}, out
