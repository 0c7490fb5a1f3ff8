"""The dialect-specific ``INSERT`` (the one with ``ON CONFLICT``) for a session's database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

# Largest number of values bound in one ``IN (...)`` list; far below SQLite's
# 32,766-variable limit and PostgreSQL's 65,535 parameters per statement.
IN_CHUNK = 1000


def dialect_name(session: Session) -> str:
    return session.get_bind().dialect.name


def dialect_insert(session: Session, table: Table) -> Any:
    """``insert(table)`` from the session's dialect, so ``on_conflict_*`` is available.

    Both SQLite (3.35+) and PostgreSQL support ``ON CONFLICT`` and ``RETURNING``, and
    SQLAlchemy's "insertmanyvalues" turns an executemany of such a statement into a
    few multi-row ``INSERT``s on both.
    """
    name = dialect_name(session)
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"Arena's database layer supports sqlite and postgresql, not {name}")


def chunks(values: list[Any], size: int = IN_CHUNK) -> list[list[Any]]:
    """``values`` cut into lists of at most ``size`` (for bounded ``IN`` lists)."""
    return [values[i : i + size] for i in range(0, len(values), size)]


def ping(session: Session) -> None:
    """One round trip to the database (``SELECT 1``); raises if it is unreachable."""
    session.execute(text("SELECT 1")).scalar_one()
