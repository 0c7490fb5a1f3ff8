"""Declarative base, portable column types and the clock every row is stamped with.

Everything here must behave the same on SQLite and PostgreSQL:

* constraint names come from one naming convention, so Alembic (and SQLite batch
  migrations, which rebuild tables) can find them again by name;
* timestamps are timezone-aware UTC in Python on both backends (SQLite has no time
  zones, so :class:`UTCDateTime` stores naive UTC there and re-attaches UTC on read);
* auto-incrementing 64-bit keys are ``BIGINT`` on PostgreSQL but must be spelled
  ``INTEGER PRIMARY KEY`` on SQLite to be its rowid (see :data:`BigSerial`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Float, ForeignKey, Integer, MetaData, String, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only aliases the rowid (and only honours AUTOINCREMENT) for a column declared
# exactly ``INTEGER PRIMARY KEY``; PostgreSQL gets a 64-bit identity.
BigSerial = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def one_of(column: str, values: tuple[str, ...]) -> str:
    """A CHECK constraint's SQL: ``column`` holds one of ``values``."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def created_at_column() -> Mapped[datetime]:
    """A row's creation time: stamped by Python, and by the database for rows written in SQL."""
    return mapped_column(UTCDateTime(), default=utcnow, server_default=func.current_timestamp())


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    Naive datetimes are rejected on the way in: a naive value is ambiguous, and
    guessing its zone is how logs end up an hour off.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"timestamps must be timezone-aware, got naive {value!r}")
        value = value.astimezone(UTC)
        # SQLite's DateTime storage drops the offset anyway; store plain UTC.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Base class of every ORM model; its ``metadata`` is Alembic's target."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
        datetime: UTCDateTime(),
    }


class RatingColumns:
    """What a rating row holds beside its keys (``ratings`` and ``board_ratings``): the
    env, TrueSkill's ``mu`` and ``sigma``, ``conservative`` = mu - 3 sigma (stored so a
    board is an index range scan), and the record behind them."""

    role: Mapped[str] = mapped_column(String(32), primary_key=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    mu: Mapped[float] = mapped_column(Float())
    sigma: Mapped[float] = mapped_column(Float())
    conservative: Mapped[float] = mapped_column(Float())
    games: Mapped[int] = mapped_column(default=0, server_default="0")
    wins: Mapped[int] = mapped_column(default=0, server_default="0")
    draws: Mapped[int] = mapped_column(default=0, server_default="0")
    losses: Mapped[int] = mapped_column(default=0, server_default="0")
    last_match_seq: Mapped[int | None] = mapped_column(BigInteger())
