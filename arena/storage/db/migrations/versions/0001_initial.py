"""Initial schema: users, tokens, envs, leagues, snapshots, agents, the match log, ratings.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Portable on purpose: server defaults are SQL functions/literals both SQLite and
PostgreSQL understand, enumerations are CHECK constraints, and descending index
columns are written as ``col DESC`` text.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import TIMESTAMP, rating_columns, stamped

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Keep in step with arena.storage.db.base.BigSerial (SQLite needs exactly INTEGER PRIMARY KEY).
BIG_SERIAL = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "envs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        stamped(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_envs")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("is_admin", sa.Boolean(), server_default=sa.false(), nullable=False),
        stamped(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        stamped(),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_index(op.f("ix_api_tokens_user_id"), "api_tokens", ["user_id"])

    op.create_table(
        "leagues",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        stamped(),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_leagues_env_id_envs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leagues")),
        sa.UniqueConstraint("name", name=op.f("uq_leagues_name")),
    )
    op.create_index(op.f("ix_leagues_env_id"), "leagues", ["env_id"])

    op.create_table(
        "matches",
        sa.Column("seq", BIG_SERIAL, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("league_id", sa.Integer(), nullable=True),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("seats", sa.JSON(), nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("winner", sa.Integer(), nullable=True),
        sa.Column("termination", sa.String(32), nullable=False),
        sa.Column("forfeit_seat", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("rated", sa.Boolean(), server_default=sa.true(), nullable=False),
        stamped(),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_matches_env_id_envs")),
        sa.ForeignKeyConstraint(
            ["league_id"], ["leagues.id"], name=op.f("fk_matches_league_id_leagues"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_matches")),
        sa.UniqueConstraint("id", name=op.f("uq_matches_id")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_matches_env_id_seq", "matches", ["env_id", sa.text("seq DESC")])

    op.create_table(
        "snapshots",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("league_id", sa.Integer(), nullable=True),
        sa.Column("parent_sha256", sa.String(64), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=True),
        stamped(),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_snapshots_env_id_envs")),
        sa.ForeignKeyConstraint(
            ["league_id"], ["leagues.id"], name=op.f("fk_snapshots_league_id_leagues"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["parent_sha256"], ["snapshots.sha256"],
            name=op.f("fk_snapshots_parent_sha256_snapshots"), ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_snapshots")),
    )
    op.create_index(op.f("ix_snapshots_env_id"), "snapshots", ["env_id"])
    op.create_index(op.f("ix_snapshots_league_id"), "snapshots", ["league_id"])

    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("env_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), server_default="queued", nullable=False),
        sa.Column("status_reason", sa.Text(), server_default="", nullable=False),
        sa.Column("snapshot_sha256", sa.String(64), nullable=True),
        stamped(),
        stamped("updated_at"),
        sa.CheckConstraint("kind IN ('builtin', 'neural')", name=op.f("ck_agents_kind")),
        sa.CheckConstraint(
            "status IN ('queued', 'validating', 'placement', 'rated', 'rejected', 'retired')",
            name=op.f("ck_agents_status"),
        ),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_agents_env_id_envs")),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_agents_owner_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_sha256"], ["snapshots.sha256"],
            name=op.f("fk_agents_snapshot_sha256_snapshots"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("env_id", "key", name=op.f("uq_agents_env_id_key")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_agents_env_id_status", "agents", ["env_id", "status"])
    op.create_index(op.f("ix_agents_owner_id"), "agents", ["owner_id"])

    op.create_table(
        "match_participants",
        sa.Column("match_seq", sa.BigInteger(), nullable=False),
        sa.Column("seat", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("team", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("result", sa.String(1), nullable=False),
        sa.CheckConstraint("result IN ('W', 'D', 'L')", name=op.f("ck_match_participants_result")),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_match_participants_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["match_seq"], ["matches.seq"], name=op.f("fk_match_participants_match_seq_matches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("match_seq", "seat", name=op.f("pk_match_participants")),
    )
    op.create_index(
        "ix_match_participants_agent_id_match_seq",
        "match_participants",
        ["agent_id", sa.text("match_seq DESC")],
    )

    op.create_table(
        "rating_events",
        sa.Column("id", BIG_SERIAL, autoincrement=True, nullable=False),
        sa.Column("match_seq", sa.BigInteger(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("mu_before", sa.Float(), nullable=False),
        sa.Column("sigma_before", sa.Float(), nullable=False),
        sa.Column("mu_after", sa.Float(), nullable=False),
        sa.Column("sigma_after", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_rating_events_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["match_seq"], ["matches.seq"], name=op.f("fk_rating_events_match_seq_matches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rating_events")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_rating_events_agent_id_match_seq", "rating_events", ["agent_id", "match_seq"]
    )
    op.create_index(op.f("ix_rating_events_match_seq"), "rating_events", ["match_seq"])

    op.create_table(
        "ratings",
        *rating_columns(),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_ratings_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["env_id"], ["envs.id"], name=op.f("fk_ratings_env_id_envs")),
        sa.PrimaryKeyConstraint("agent_id", "role", name=op.f("pk_ratings")),
    )
    op.create_index(
        "ix_ratings_env_id_role_conservative",
        "ratings",
        ["env_id", "role", sa.text("conservative DESC"), "agent_id"],
    )


def downgrade() -> None:
    # Dropping a table drops its indexes too; children before parents.
    for table in (
        "ratings",
        "rating_events",
        "match_participants",
        "agents",
        "snapshots",
        "matches",
        "leagues",
        "api_tokens",
        "users",
        "envs",
    ):
        op.drop_table(table)
