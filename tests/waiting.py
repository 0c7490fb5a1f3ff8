"""Waiting in tests without asserting how long anything took (speed is measured by benchmarks/).

:func:`wait_for` polls until something holds and fails naming what it waited for: its deadline is
a hang guard, not a claim about speed. :func:`wait_for_async` is the same inside an event loop.
:class:`SteppedClock` is a ``time`` module whose sleeps move a simulated clock, for code that waits
out a timeout of its own: a test then checks where that code gave up on the clock, not the wall.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 90.0, every_s: float = 0.1,
             explain: Callable[[], str] | None = None, *, procs: Sequence[subprocess.Popen] = (),
             not_yet: tuple[type[BaseException], ...] = ()) -> T:
    """``probe()``'s first truthy value, polled every ``every_s`` until ``timeout_s``.

    Args:
        what: What is awaited, for the failure ("the agent's presence").
        probe: Returns the awaited value, or something falsy while it is not there yet.
        timeout_s: Fail after this long (a hang guard: never a measure of speed).
        every_s: Pause between probes.
        explain: Appended to any failure (a server's log tail, say).
        procs: Processes that must keep running meanwhile: fail at once if one exits.
        not_yet: Errors of ``probe`` that mean "not yet" (a server not listening yet).

    Raises:
        AssertionError: Time ran out, or a process of ``procs`` exited, before ``what``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = probe()
        except not_yet:
            value = None
        if value:
            return value
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"{proc.args!r} exited ({proc.returncode}) while waiting for {what}"
                                     f"{_detail(explain)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{_detail(explain)}")
        time.sleep(every_s)


def _detail(explain: Callable[[], str] | None) -> str:
    return f"\n{explain()}" if explain is not None else ""


async def wait_for_async(what: str, probe: Callable[[], T | None | Awaitable[T | None]], timeout_s: float = 10.0,
                         every_s: float = 0.01) -> T:
    """:func:`wait_for` inside an event loop: the loop runs on between probes (``probe`` may be a
    coroutine function)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(every_s)


class SteppedClock:
    """Simulated seconds for a module that imports ``time``: ``sleep`` moves the clock at once.

    ``monkeypatch.setattr(module, "time", clock.module())``; then ``clock.sleeps`` lists every
    pause the module took and ``clock.elapsed`` is how far they took the clock. Sleeping past
    ``limit_s`` fails the test (code that never gives up would otherwise spin for good).
    """

    START = 1000.0
    """Where the clock starts (not 0: code may take a 0.0 reading for "not yet")."""

    def __init__(self, limit_s: float = 3600.0) -> None:
        self.now = self.START
        self.limit_s = limit_s
        self.sleeps: list[float] = []

    @property
    def elapsed(self) -> float:
        return self.now - self.START

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.elapsed > self.limit_s:
            raise AssertionError(f"still waiting after {self.limit_s:g} simulated seconds ({len(self.sleeps)} sleeps)")

    def module(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(monotonic=lambda: self.now, time=lambda: 1_900_000_000.0 + self.now,
                                     sleep=self.sleep)
