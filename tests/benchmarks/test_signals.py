"""A benchmark stopped with SIGTERM cleans up (``benchmarks/support/signals.py``): its
``finally`` blocks run, so the processes it started do not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import subprocess, sys, time
sys.path.insert(0, {root!r})
from benchmarks.support.signals import unwind_on_sigterm
if {unwind}:
    unwind_on_sigterm()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
try:
    print(child.pid, flush=True)
    time.sleep(600)
finally:
    print("cleaning", flush=True)
    time.sleep(0.5)  # a cleanup that takes a moment, as stopping a server does
    child.kill()
    child.wait()
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(("unwind", "signals"), [(True, 1), (True, 2), (False, 1)],
                         ids=["handler", "handler-twice", "python-default"])
def test_sigterm_runs_the_cleanup(unwind: bool, signals: int) -> None:
    """With the handler, SIGTERM ends the script with status 143 after its ``finally`` killed
    the child, also when a second SIGTERM comes during the cleanup (``timeout`` and ``pkill -f``
    send two: the second used to end the cleanup); without it (Python's default) the child is left
    running, which is the defect the handler mends."""
    script = subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=str(ROOT), unwind=unwind)],
                              stdout=subprocess.PIPE, text=True)
    child = int(script.stdout.readline())
    try:
        script.send_signal(signal.SIGTERM)
        if signals == 2:
            assert script.stdout.readline().strip() == "cleaning"
            script.send_signal(signal.SIGTERM)  # while the cleanup runs
        status = script.wait(timeout=30)
        if unwind:
            assert status == 143
            assert not alive(child)
        else:
            assert status == -signal.SIGTERM
            assert alive(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        script.stdout.close()
