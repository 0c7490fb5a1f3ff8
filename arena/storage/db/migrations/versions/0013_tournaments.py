"""Tournaments: ``tournaments`` (a seeded field of agents, a format, a state); their games are
matches of the board ``tournament:<id>`` (``matches.board``, from 0011_competitions).

Written 2026-11-28; revision 0013_tournaments follows 0012_one_probe.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import stamped

revision = "0013_tournaments"
down_revision = "0012_one_probe"


def upgrade() -> None:
    op.create_table(
        "tournaments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.String(length=64), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=True),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=True),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("entrants", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), server_default="running", nullable=False),
        sa.Column("error", sa.Text(), server_default="", nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        stamped(),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('running', 'finished', 'failed')", name=op.f("ck_tournaments_state")),
        sa.CheckConstraint("kind IN ('round_robin', 'double_round_robin', 'swiss', 'single_elimination')",
                           name=op.f("ck_tournaments_kind")),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_tournaments_env_id_envs")),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_tournaments_competition_id_competitions"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], name=op.f("fk_tournaments_created_by_users"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tournaments")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_tournaments_competition_id"), "tournaments", ["competition_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_tournaments_competition_id"), table_name="tournaments")
    op.drop_table("tournaments")
