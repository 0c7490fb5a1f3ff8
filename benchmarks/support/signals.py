"""A benchmark stopped with SIGTERM cleans up as a Ctrl-C does.

Python's default SIGTERM ends the process at once: no ``finally`` block and no ``with`` exit
runs, so a benchmark that started an API process, an embedded Valkey, clients or a Ray
cluster left them running. :func:`unwind_on_sigterm` turns the first SIGTERM into
``SystemExit(143)`` raised in the main thread, which unwinds through the script's cleanup
like ``KeyboardInterrupt``. Later SIGTERMs are ignored: they often come together
(``timeout`` signals its child and ``pkill -f`` matches both), and a second one used to end
the cleanup it interrupted. A cleanup that hangs is ended with SIGKILL, as ``arena serve``'s.
"""

from __future__ import annotations

import signal
from types import FrameType

EXIT_SIGTERM = 128 + signal.SIGTERM
"""The exit status of a run stopped by SIGTERM, as a shell reports a process killed by it."""


def _unwind(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleanup this starts runs to its end
    raise SystemExit(EXIT_SIGTERM)


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind the main thread (``finally`` blocks and ``with`` exits run).
    Call it in a benchmark's ``if __name__ == "__main__":`` block, before ``main()``: not in
    ``main()``, which tests call in their own process."""
    signal.signal(signal.SIGTERM, _unwind)
