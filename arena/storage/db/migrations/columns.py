"""Columns that several migrations create alike.

Past migrations call these: what they return must never change (a new shape is a new function).
"""

from __future__ import annotations

import sqlalchemy as sa

TIMESTAMP = sa.DateTime(timezone=True)


def stamped(name: str = "created_at") -> sa.Column:
    """A non-null timestamp column that defaults to the time of the insert."""
    return sa.Column(name, TIMESTAMP, server_default=sa.func.current_timestamp(), nullable=False)


def rating_columns() -> list[sa.Column]:
    """An agent's TrueSkill rating in one role and its game counts (``ratings``, ``board_ratings``)."""
    return [
        sa.Column("agent_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("conservative", sa.Float(), nullable=False),
        sa.Column("games", sa.Integer(), server_default="0", nullable=False),
        sa.Column("wins", sa.Integer(), server_default="0", nullable=False),
        sa.Column("draws", sa.Integer(), server_default="0", nullable=False),
        sa.Column("losses", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_match_seq", sa.BigInteger(), nullable=True),
    ]
