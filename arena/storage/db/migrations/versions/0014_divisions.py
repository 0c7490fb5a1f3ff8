"""Divisions with bosses in competitions: ``competitions.divisions`` (bottom to top, each with its
boss, a reference agent; NULL: no divisions) and ``competition_entries.division`` (0: the bottom;
an entry only ever moves up).

Written 2026-11-28; revision 0014_divisions follows 0013_tournaments.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_divisions"
down_revision = "0013_tournaments"


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): rebuilding would lose the tables' AUTOINCREMENT.
    op.add_column("competitions", sa.Column("divisions", sa.JSON(), nullable=True))
    op.add_column("competition_entries", sa.Column("division", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("competition_entries", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("division")
    with op.batch_alter_table("competitions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("divisions")
