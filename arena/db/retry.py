"""Riding out a database that is briefly unreachable (restart, failover, network blip).

:func:`retry_transient` re-runs a unit of work — a whole transaction, so a retry never
sees half of the previous attempt — while the failure is the kind that goes away:
connection refused or dropped, a server shutting down, SQLite's lock timeout. Anything
else (a constraint violation, a bug) is raised at once. Recording is idempotent by
match id, so retrying a commit whose acknowledgement was lost changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import exc as sa_exc

from envs.errors import ServiceUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` says the database is (for now) unreachable, not that the work is wrong."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, _TRANSIENT)


def retry_transient(work: Callable[[], T], *, timeout_s: float, what: str,
                    hint: str = "") -> T:
    """``work()``, retried with capped exponential backoff while failures are transient.

    Args:
        work: The unit of work; it must open (and commit) its own transaction.
        timeout_s: Give up once this much time has passed since the first failure.
        what: What is being done, for logs and the final error ("recording batch 7").
        hint: Appended to the final error (what to check).

    Raises:
        ServiceUnavailable: The database stayed unreachable for ``timeout_s``.
    """
    delay, failures, first = 0.1, 0, 0.0
    while True:
        try:
            result = work()
        except Exception as error:
            if not is_transient(error):
                raise
            now = time.monotonic()
            first = first or now
            if now + delay - first > timeout_s:
                raise ServiceUnavailable(
                    f"{what}: the database did not answer for {timeout_s:g}s "
                    f"({_reason(error)}){'; ' + hint if hint else ''}"
                ) from None
            if failures % 10 == 0:
                log.warning("%s: database unreachable (%s); retrying", what, _reason(error))
            failures += 1
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        if failures:
            log.warning("%s: database back after %d failed attempts (%.1fs)", what, failures,
                        time.monotonic() - first)
        return result


def _reason(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
