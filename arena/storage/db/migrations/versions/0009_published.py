"""Published agents: ``agents.published``, whether anyone may download an agent's weights.

An owner publishes a neural agent (``PATCH /api/v1/agents/{id}`` with ``{"published":
true}``) to let others download its weights and spec (``GET /agents/{id}/weights``,
``/spec``), e.g. as an ``arena:<id>@<url>`` opponent of ``arena.gym``. Agents are
private by default; existing agents stay private.

Written 2026-11-28; revision 0009_published follows 0008_connected.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_published"
down_revision = "0008_connected"


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): rebuilding ``agents`` would trip the foreign keys
    # that point at it and lose its AUTOINCREMENT.
    op.add_column("agents", sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("agents", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("published")
