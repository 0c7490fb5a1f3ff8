"""Replay retention: which matches were ever viewed, and which lost their action lists.

``ARENA_REPLAY_RETENTION_DAYS`` bounds the match log's biggest column: the action
list of a match older than the retention that nobody ever opened is emptied
(``replay_dropped``), while its seed, seats, scores, result and rating events stay,
so ratings still rebuild from the log. Opening a replay (API or web page) sets
``replay_requested``, which keeps it. Existing matches start as not viewed, not dropped.

Written 2026-11-24; revision 0007_retention follows 0006_probes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_retention"
down_revision = "0006_probes"


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): a batch "move and copy" would rebuild the table
    # and lose its AUTOINCREMENT, letting a deleted newest seq be reused.
    op.add_column("matches", sa.Column("replay_requested", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("matches", sa.Column("replay_dropped", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("matches", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("replay_dropped")
        batch.drop_column("replay_requested")
