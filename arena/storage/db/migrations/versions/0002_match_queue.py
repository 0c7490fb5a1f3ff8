"""The persisted match queue: scheduled matches not yet recorded.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import stamped

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "match_queue",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("league_id", sa.Integer(), nullable=True),
        sa.Column("batch_key", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("agents", sa.JSON(), nullable=False),
        stamped(),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_match_queue_env_id_envs")),
        sa.ForeignKeyConstraint(["league_id"], ["leagues.id"], ondelete="SET NULL",
                                name=op.f("fk_match_queue_league_id_leagues")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_match_queue")),
    )
    op.create_index("ix_match_queue_env_id_batch_key", "match_queue", ["env_id", "batch_key"])


def downgrade() -> None:
    op.drop_index("ix_match_queue_env_id_batch_key", table_name="match_queue")
    op.drop_table("match_queue")
