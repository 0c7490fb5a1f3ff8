"""The dialect-specific parts of writing: ``INSERT ... ON CONFLICT`` and bulk appends.

:func:`bulk_append` is how the match log's high-volume tables are written (matches via a
staging table, participants, rating events): ``COPY FROM STDIN`` on PostgreSQL, one
prepared ``INSERT`` run with the driver's ``executemany`` on SQLite, both on the
session's own connection, so inside its transaction. ``benchmarks/league.py --ingest``
measures it against SQLAlchemy's executemany.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
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


def insert_row(session: Session, row: Any) -> int:
    """Adds the ORM ``row`` and flushes it; returns the id the database gave it."""
    session.add(row)
    session.flush()
    return row.id


def chunks(values: list[Any], size: int = IN_CHUNK) -> list[list[Any]]:
    """``values`` cut into lists of at most ``size`` (for bounded ``IN`` lists)."""
    return [values[i : i + size] for i in range(0, len(values), size)]


def ping(session: Session) -> None:
    """One round trip to the database (``SELECT 1``); raises if it is unreachable."""
    session.execute(text("SELECT 1")).scalar_one()


def driver_connection(session: Session) -> Any:
    """The DB-API connection under ``session`` (psycopg or sqlite3), in its transaction.

    Pending ORM changes are flushed first, so rows written on it land after them.
    """
    session.flush()
    return session.connection().connection.driver_connection


def bulk_append(session: Session, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Appends ``rows`` (tuples in ``columns`` order) to ``table``, inside the session's transaction.

    No conflict handling and nothing returned: a duplicate key raises as a plain
    ``INSERT`` would. PostgreSQL: ``COPY table (columns) FROM STDIN`` (text format; JSON
    columns take JSON text); SQLite: ``executemany`` of one prepared statement on the
    driver cursor (sqlite3 binds in C; SQLAlchemy's per-row parameter processing is
    skipped).

    ``table`` and ``columns`` come from the models, never from user input.
    """
    names = ", ".join(columns)
    name = dialect_name(session)
    dbapi = driver_connection(session)
    if name == "postgresql":
        statement = f"COPY {table} ({names}) FROM STDIN"
        with driver_errors(session, statement), dbapi.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
    elif name == "sqlite":
        statement = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})"
        cursor = dbapi.cursor()
        try:
            with driver_errors(session, statement):
                cursor.executemany(statement, rows)
        finally:
            cursor.close()
    else:
        raise NotImplementedError(f"Arena's database layer supports sqlite and postgresql, not {name}")


@contextmanager
def driver_errors(session: Session, statement: str) -> Iterator[None]:
    """Raise the driver's errors as SQLAlchemy's (``IntegrityError``, ``OperationalError``, ...),
    as if the statement had gone through the session, so callers and the retry policy
    see one kind of error whichever path wrote."""
    dialect = session.get_bind().dialect
    try:
        yield
    except dialect.loaded_dbapi.Error as error:
        raise DBAPIError.instance(statement, None, error, dialect.loaded_dbapi.Error, dialect=dialect) from error
