"""Where probes run: a spawned process each, or a Ray task each (see :mod:`arena.evaluation.probes`)."""

from __future__ import annotations

import multiprocessing
import os
import queue
from dataclasses import dataclass
from typing import Any, Protocol

from arena.core.settings import Settings
from arena.evaluation.probe_worker import ProbeJob, probe_process_main, run_probe_task

__all__ = ["ProbeBackend", "ProbeEvent", "ProcessProbeBackend", "RayProbeBackend", "make_backend"]


@dataclass(frozen=True)
class ProbeEvent:
    """What a backend reports: ``progress`` (env steps), ``done`` (the result) or ``failed``."""

    kind: str
    probe_id: int
    value: Any


class ProbeBackend(Protocol):
    """Where probes run."""

    def start(self, job: ProbeJob) -> None: ...
    def poll(self) -> list[ProbeEvent]: ...
    def running(self) -> int: ...
    def stop(self) -> None: ...


class ProcessProbeBackend:
    """One spawned process per probe (terminated on stop)."""

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")  # fork would copy the server's threads and locks
        self._messages = self._ctx.Queue()
        self._procs: dict[int, Any] = {}

    def start(self, job: ProbeJob) -> None:
        job = {**job, "parent_pid": os.getpid()}
        proc = self._ctx.Process(target=probe_process_main, args=(job, self._messages), daemon=True,
                                 name=f"arena-probe-{job['probe_id']}")
        proc.start()
        self._procs[job["probe_id"]] = proc

    def poll(self) -> list[ProbeEvent]:
        exited = [pid for pid, proc in self._procs.items() if proc.exitcode is not None]
        events = []
        while True:
            try:
                kind, probe_id, value = self._messages.get_nowait()
            except queue.Empty:
                break
            events.append(ProbeEvent(kind, probe_id, value))
        finished = {e.probe_id for e in events if e.kind != "progress"}
        for pid in finished:
            proc = self._procs.pop(pid, None)
            if proc is not None:
                proc.join(5)
        for pid in exited:
            if pid not in finished and pid in self._procs:
                proc = self._procs.pop(pid)
                events.append(ProbeEvent("failed", pid, f"the probe process exited with code {proc.exitcode}"))
        return events

    def running(self) -> int:
        return len(self._procs)

    def stop(self) -> None:
        for proc in self._procs.values():
            proc.terminate()
        for proc in self._procs.values():
            proc.join(5)
        self._procs.clear()
        self._messages.close()


class RayProbeBackend:
    """One Ray task per probe, ``num_cpus=1``: Ray schedules it only on a CPU no worker holds."""

    def __init__(self) -> None:
        import ray

        self._ray = ray
        self._task = ray.remote(num_cpus=1, max_retries=0)(run_probe_task)
        self._refs: dict[int, Any] = {}

    def start(self, job: ProbeJob) -> None:
        self._refs[job["probe_id"]] = self._task.remote(job)

    def poll(self) -> list[ProbeEvent]:
        if not self._refs:
            return []
        ready, _ = self._ray.wait(list(self._refs.values()), num_returns=len(self._refs), timeout=0)
        done = set(ready)
        events = []
        for pid in [pid for pid, ref in self._refs.items() if ref in done]:
            ref = self._refs.pop(pid)
            try:
                events.append(ProbeEvent("done", pid, self._ray.get(ref)))
            except Exception as exc:  # noqa: BLE001 - the task's error is the probe's error
                events.append(ProbeEvent("failed", pid, f"{type(exc).__name__}: {exc}"[:2000]))
        return events

    def running(self) -> int:
        return len(self._refs)

    def stop(self) -> None:
        for ref in self._refs.values():
            self._ray.cancel(ref, force=True)
        self._refs.clear()


def make_backend(settings: Settings) -> ProbeBackend:
    """The backend ``settings.probe_backend`` names (``auto``: Ray when it is initialized)."""
    if settings.probe_backend == "ray":
        return RayProbeBackend()
    if settings.probe_backend == "auto":
        try:
            import ray
        except ImportError:
            return ProcessProbeBackend()
        if ray.is_initialized():
            return RayProbeBackend()
    return ProcessProbeBackend()
