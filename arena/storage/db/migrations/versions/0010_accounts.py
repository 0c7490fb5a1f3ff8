"""Accounts in the browser: ``users.password_hash`` and ``web_sessions``.

A person signs up and signs in on the site with a password (stored only as its argon2id
hash; ``NULL`` for users made by ``POST /api/v1/users`` who never set one: the CLI's
token flow is unchanged). Signing in opens a browser session: the cookie carries a
random id, the table only its sha256, with an expiry; signing out deletes the row.

Written 2026-11-28; revision 0010_accounts follows 0009_published.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import stamped

revision = "0010_accounts"
down_revision = "0009_published"


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): rebuilding ``users`` would trip the foreign keys that point at it.
    op.add_column("users", sa.Column("password_hash", sa.String(length=255), nullable=True))
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        stamped(),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_web_sessions_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("session_hash", name=op.f("uq_web_sessions_session_hash")),
    )
    op.create_index(op.f("ix_web_sessions_user_id"), "web_sessions", ["user_id"])
    op.create_index(op.f("ix_web_sessions_expires_at"), "web_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_web_sessions_expires_at"), table_name="web_sessions")
    op.drop_index(op.f("ix_web_sessions_user_id"), table_name="web_sessions")
    op.drop_table("web_sessions")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("password_hash")
