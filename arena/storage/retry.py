"""The one retry policy for backing services that are briefly away.

A database restarting or failing over, Redis being restarted, SQLite's write lock held
by another process: each is a failure that goes away. :func:`retry` re-runs a unit of
work with capped exponential backoff (:data:`BACKOFF`) while its failure is transient,
for a bounded time, and then raises the caller's error with a message that says what
to check. Anything else (a constraint violation, a bug) is raised at once.

:func:`retry_transient` is the database's use of it: the unit of work is a whole
transaction, so a retry never sees half of the previous attempt, and recording is
idempotent by match id, so retrying a commit whose acknowledgement was lost changes
nothing. :func:`is_write_conflict` names the failures caused by another writer
(SQLite's write lock busy, PostgreSQL's serialization failures and deadlocks): the
transaction was rolled back, so any write may be retried after them
(:meth:`arena.storage.db.connection.Sessions.write_transaction`). The Redis wait
(:func:`arena.storage.redis_server.connect_redis`) and SQLite's switch to WAL use the
same policy.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import exc as sa_exc

from envs.errors import ServiceUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Sleep ``first_s`` after the first failure, doubling up to ``max_s``."""

    first_s: float = 0.05
    max_s: float = 1.0


BACKOFF = Backoff()
"""The policy every retry in Arena uses."""

_TRANSIENT_DB = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)

WRITE_CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})
"""PostgreSQL's serialization_failure and deadlock_detected: the transaction was rolled back."""


def retry(work: Callable[[], T], *, transient: Callable[[BaseException], bool], timeout_s: float,
          give_up: Callable[[BaseException], Exception], what: str, backoff: Backoff = BACKOFF) -> T:
    """``work()``, retried with backoff while its failures are ``transient``.

    Args:
        work: The unit of work (it must be safe to run again).
        transient: Whether an error is worth waiting out.
        timeout_s: Give up once this much time has passed since the first failure.
        give_up: Builds the error raised when the time is up, from the last failure.
        what: What is being done, for the logs ("recording 4096 matches").
        backoff: The delays between attempts.

    Raises:
        The error ``give_up`` builds, or a non-transient error unchanged.
    """
    delay, failures, first = backoff.first_s, 0, None
    while True:
        try:
            result = work()
        except Exception as error:
            if not transient(error):
                raise
            now = time.monotonic()
            first = now if first is None else first
            if now + delay - first > timeout_s:
                raise give_up(error) from None
            if failures % 10 == 0:
                log.warning("%s: %s; retrying", what, reason(error))
            failures += 1
            time.sleep(delay)
            delay = min(delay * 2, backoff.max_s)
            continue
        if failures:
            log.warning("%s: back after %d failed attempts (%.1fs)", what, failures, time.monotonic() - first)
        return result


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` says the database is (for now) unreachable, not that the work is wrong."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, _TRANSIENT_DB)


def is_write_conflict(error: BaseException) -> bool:
    """Whether ``error`` says another writer was in the way, and nothing of ours was committed.

    SQLite: "database is locked" / "busy" (the write lock stayed taken for the whole busy
    timeout, or a transaction that began as a reader could not become a writer).
    PostgreSQL: SQLSTATE 40001 (serialization failure) or 40P01 (deadlock detected).
    A pool with no free connection (every one busy writing) counts too: nothing ran.
    """
    if isinstance(error, sa_exc.TimeoutError):
        return True
    orig = getattr(error, "orig", None) or error
    if isinstance(orig, sqlite3.OperationalError):
        message = str(orig).lower()
        return "locked" in message or "busy" in message
    return getattr(orig, "sqlstate", None) in WRITE_CONFLICT_SQLSTATES


def retry_transient(work: Callable[[], T], *, timeout_s: float, what: str, hint: str = "",
                    idempotent: bool = True) -> T:
    """``work()`` (a whole transaction), retried while the database is unreachable or busy.

    Args:
        work: The unit of work; it must open (and commit) its own transaction.
        timeout_s: Give up once this much time has passed since the first failure.
        what: What is being done, for logs and the final error ("recording batch 7").
        hint: Appended to the final error (what to check).
        idempotent: Whether running ``work`` twice is harmless. Only then is a lost
            connection retried (its commit may have happened); write conflicts
            (:func:`is_write_conflict`) always are.

    Raises:
        ServiceUnavailable: The database stayed unreachable (or busy) for ``timeout_s``.
    """
    def give_up(error: BaseException) -> Exception:
        state = "stayed busy" if is_write_conflict(error) else "did not answer"
        return ServiceUnavailable(f"{what}: the database {state} for {timeout_s:g}s "
                                  f"({reason(error)}){'; ' + hint if hint else ''}")

    def transient(error: BaseException) -> bool:
        return is_write_conflict(error) or (idempotent and is_transient(error))

    return retry(work, transient=transient, timeout_s=timeout_s, give_up=give_up, what=what)


def reason(error: BaseException) -> str:
    """The first line of the driver's message (or the error's type)."""
    orig = getattr(error, "orig", None) or error
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
