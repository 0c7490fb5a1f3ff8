"""A training league's strategy timeline: phase rates and ratings per generation.

One row per (league, generation): the rate of each strategy phase the env detects
(hide and seek: chasing, fort, ramp use, ramp defense, ...), the ratings of the
generation's snapshots per role, and the match in which each phase first happened.
Derived data, rewritten by the trainer from its saved state.

Written 2026-11-24; revision 0004_phases follows 0003 (no branches, no dependencies).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import stamped

revision = "0004_phases"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "league_generations",
        sa.Column("league_id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("episodes", sa.BigInteger(), nullable=False),
        sa.Column("phase_rates", sa.JSON(), nullable=False),
        sa.Column("ratings", sa.JSON(), nullable=False),
        sa.Column("first_matches", sa.JSON(), nullable=False),
        stamped("updated_at"),
        sa.ForeignKeyConstraint(["league_id"], ["leagues.id"], name=op.f("fk_league_generations_league_id_leagues"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("league_id", "generation", name=op.f("pk_league_generations")),
    )


def downgrade() -> None:
    op.drop_table("league_generations")
