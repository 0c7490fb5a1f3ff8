"""Exploitability probes: one row per probe of an agent, its budget, status and result.

Revision ID: 0006_probes
Revises: 0005_roles
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import stamped

revision: str = "0006_probes"
down_revision: str | None = "0005_roles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "probes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("budget_env_steps", sa.BigInteger(), nullable=False),
        sa.Column("eval_games", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), server_default="queued", nullable=False),
        sa.Column("requested_by", sa.String(64), server_default="", nullable=False),
        sa.Column("env_steps", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("games", sa.Integer(), nullable=True),
        sa.Column("wins", sa.Integer(), nullable=True),
        sa.Column("draws", sa.Integer(), nullable=True),
        sa.Column("losses", sa.Integer(), nullable=True),
        sa.Column("win_rate", sa.Float(), nullable=True),
        sa.Column("ci_low", sa.Float(), nullable=True),
        sa.Column("ci_high", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), server_default="", nullable=False),
        stamped(),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name=op.f("ck_probes_status")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE",
                                name=op.f("fk_probes_agent_id_agents")),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_probes_env_id_envs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probes")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_probes_agent_id_id", "probes", ["agent_id", "id"])
    op.create_index("ix_probes_status_id", "probes", ["status", "id"])


def downgrade() -> None:
    op.drop_index("ix_probes_status_id", table_name="probes")
    op.drop_index("ix_probes_agent_id_id", table_name="probes")
    op.drop_table("probes")
