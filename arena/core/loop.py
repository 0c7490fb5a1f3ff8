"""The background service's loops: each worker (the ladders, the durable queues' workers, the
probes, the fingerprints) runs its rounds on a daemon thread of its own until stopped.

A subclass says what one round does (:meth:`ServiceLoop.cycle`, returning how long to wait
before the next one); a round that raises is logged and the loop goes on after
``retry_s``, so one bad round (the database or Redis away for a moment) never ends a loop.
"""

from __future__ import annotations

import logging
import threading
from typing import Self

log = logging.getLogger(__name__)


class ServiceLoop:
    """Rounds of :meth:`cycle` on a daemon thread named ``thread_name``, from :meth:`start`
    until :meth:`stop_loop` (which waits for the round under way)."""

    thread_name = "arena-loop"
    retry_s = 2.0
    """Seconds to wait after a round that raised."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def cycle(self) -> float:
        """One round; the seconds to wait before the next (0: at once)."""
        raise NotImplementedError

    def run(self) -> None:
        """The rounds, in this thread, until stopped."""
        while not self._stop.is_set():
            try:
                pause = self.cycle()
            except Exception:
                log.exception("%s: a round failed; going on in %.0f s", self.thread_name, self.retry_s)
                pause = self.retry_s
            if pause > 0:
                self._stop.wait(pause)

    def start(self) -> Self:
        self._thread = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def ask_to_stop(self) -> None:
        """Stop after the round under way, without waiting for it (:meth:`stop_loop` waits): a
        service stopping several loops asks each first, so their last rounds end together."""
        self._stop.set()

    def stop_loop(self, timeout: float) -> None:
        """Stop after the round under way, waiting for it at most ``timeout`` seconds."""
        self.ask_to_stop()
        if self._thread is not None:
            self._thread.join(timeout)
