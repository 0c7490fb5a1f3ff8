"""What a test sees of an ONNX worker process from outside: which request it is inside, and
whether it has died (for its parent: every thread of it gone, see :func:`dead`).

A worker moves its soft ``RLIMIT_CPU`` before every request to the CPU time it has used
plus what that request may use (``limit_s * threads + 1`` seconds:
:func:`agents.onnx_agents.confine.limit_cpu`), so the CPU seconds a worker has left
(``/proc/<pid>/limits`` against ``/proc/<pid>/stat``) say which request it is in and how
much of it it has burned. A test that must kill a worker inside a long run waits for that
instead of sleeping and guessing.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.waiting import wait_for

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_left_s(pid: int) -> float | None:
    """CPU seconds process ``pid`` may still use before the kernel kills it.

    ``None`` when it has no CPU limit (a worker that has had no request yet) or is gone.
    """
    try:
        limits = Path(f"/proc/{pid}/limits").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    soft = next(line.split()[3] for line in limits.splitlines() if line.startswith("Max cpu time"))
    if soft == "unlimited":
        return None
    fields = stat.rsplit(")", 1)[1].split()  # from field 3 (state) on: the name may hold spaces
    used = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)
    return int(soft) - used


def burning_in_request(pid: int, limit_s: float, threads: int = 1, burned_s: float = 0.5) -> bool:
    """Whether worker ``pid`` is inside a request of deadline ``limit_s`` (run with
    ``threads``) and has burned more than ``burned_s`` CPU seconds of it already.

    Such a request may use ``limit_s * threads + 1`` CPU seconds and starts with up to one
    more left (the soft limit is whole seconds); a request with less than half of that
    (a check, a load, a shorter run) does not count.
    """
    allowance_s = limit_s * threads + 1.0
    left = cpu_left_s(pid)
    return left is not None and allowance_s / 2 < left <= allowance_s - burned_s


def dead(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone, or a zombie its parent can reap.

    A zombie main thread is not enough. SIGKILLed, a worker's main thread turns ``Z`` at
    once while its other threads (onnxruntime's) are still exiting, and until the last of
    them has gone the kernel does not let the parent reap it: ``waitpid(WNOHANG)``, so
    ``Popen.poll()``, still says it runs, and the sandbox would lease it as an idle worker
    (the next request then fails with ``SandboxCrashed: ... killed by SIGKILL``). So the
    process counts as dead only once ``/proc/<pid>/task`` lists nothing but its main thread.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X") and threads == [str(pid)]


def wait_until_dead(pids: list[int], timeout_s: float = 30.0) -> None:
    """Return once every process of ``pids`` has ended; fail the test after ``timeout_s``."""
    wait_for(f"processes {pids} to end after they were killed", lambda: all(dead(pid) for pid in pids),
             timeout_s=timeout_s, every_s=0.01)
