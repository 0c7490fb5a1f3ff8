"""Competitions: seasons with deadlines, teams, entries, reference agents, and boards of their own.

New tables ``competitions``, ``competition_organizers``, ``competition_members``,
``competition_teams``, ``competition_team_members``, ``competition_entries``,
``competition_references`` and ``board_ratings`` (ratings on boards other than the env
ladders); ``matches.board`` names the board a match is rated on (``NULL``: the env's
ladder, or no board at all). Existing matches keep ``NULL``.

Written 2026-11-28; revision 0011_competitions follows 0010_accounts.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from arena.storage.db.migrations.columns import rating_columns, stamped

revision = "0011_competitions"
down_revision = "0010_accounts"


def _fk(table: str, column: str, target: str, ondelete: str | None = None) -> sa.ForeignKeyConstraint:
    ref_table = target.split(".")[0]
    return sa.ForeignKeyConstraint([column], [target], name=op.f(f"fk_{table}_{column}_{ref_table}"),
                                   ondelete=ondelete)


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): rebuilding ``matches`` would lose its AUTOINCREMENT.
    op.add_column("matches", sa.Column("board", sa.String(length=64), nullable=True))
    op.create_index("ix_matches_board_seq", "matches", ["board", "seq"])
    op.create_table(
        "competitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=True),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("rules_md", sa.Text(), server_default="", nullable=False),
        sa.Column("state", sa.String(length=16), server_default="draft", nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("is_public", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("invite_code", sa.String(length=32), nullable=True),
        sa.Column("opens_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("final_ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("final_match_budget", sa.BigInteger(), nullable=False),
        sa.Column("daily_submissions", sa.Integer(), nullable=False),
        sa.Column("active_entries", sa.Integer(), nullable=False),
        sa.Column("team_size", sa.Integer(), nullable=False),
        sa.Column("merge_deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("allowed_paths", sa.JSON(), nullable=False),
        sa.Column("top_k", sa.Integer(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("tie_margin", sa.Float(), nullable=False),
        sa.Column("final_floor", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        stamped(),
        sa.Column("final_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("final_result", sa.JSON(), nullable=True),
        sa.CheckConstraint("state IN ('draft', 'open', 'final', 'finished')", name=op.f("ck_competitions_state")),
        _fk("competitions", "env_id", "envs.id"),
        _fk("competitions", "created_by", "users.id", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_competitions")),
        sa.UniqueConstraint("invite_code", name=op.f("uq_competitions_invite_code")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_competitions_env_id"), "competitions", ["env_id"])
    op.create_table(
        "competition_organizers",
        sa.Column("user_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("granted_by", sa.String(length=64), nullable=False),
        stamped(),
        _fk("competition_organizers", "user_id", "users.id", "CASCADE"),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_competition_organizers")),
    )
    op.create_table(
        "competition_members",
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        stamped("joined_at"),
        _fk("competition_members", "competition_id", "competitions.id", "CASCADE"),
        _fk("competition_members", "user_id", "users.id", "CASCADE"),
        sa.PrimaryKeyConstraint("competition_id", "user_id", name=op.f("pk_competition_members")),
    )
    op.create_index(op.f("ix_competition_members_user_id"), "competition_members", ["user_id"])
    op.create_table(
        "competition_teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("join_code", sa.String(length=32), nullable=False),
        stamped(),
        sa.Column("merged_into", sa.Integer(), nullable=True),
        _fk("competition_teams", "competition_id", "competitions.id", "CASCADE"),
        _fk("competition_teams", "merged_into", "competition_teams.id", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_competition_teams")),
        sa.UniqueConstraint("competition_id", "name", name=op.f("uq_competition_teams_competition_id_name")),
        sa.UniqueConstraint("join_code", name=op.f("uq_competition_teams_join_code")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "competition_team_members",
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        stamped("joined_at"),
        _fk("competition_team_members", "competition_id", "competitions.id", "CASCADE"),
        _fk("competition_team_members", "user_id", "users.id", "CASCADE"),
        _fk("competition_team_members", "team_id", "competition_teams.id", "CASCADE"),
        sa.PrimaryKeyConstraint("competition_id", "user_id", name=op.f("pk_competition_team_members")),
    )
    op.create_index(op.f("ix_competition_team_members_team_id"), "competition_team_members", ["team_id"])
    op.create_table(
        "competition_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("submitted_by", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("frozen", sa.Boolean(), server_default=sa.false(), nullable=False),
        _fk("competition_entries", "competition_id", "competitions.id", "CASCADE"),
        _fk("competition_entries", "team_id", "competition_teams.id", "CASCADE"),
        _fk("competition_entries", "agent_id", "agents.id", "CASCADE"),
        _fk("competition_entries", "submitted_by", "users.id", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_competition_entries")),
        sa.UniqueConstraint("competition_id", "agent_id", name=op.f("uq_competition_entries_competition_id_agent_id")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_competition_entries_team_id_submitted_at", "competition_entries", ["team_id", "submitted_at"])
    op.create_table(
        "competition_references",
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        _fk("competition_references", "competition_id", "competitions.id", "CASCADE"),
        _fk("competition_references", "agent_id", "agents.id", "CASCADE"),
        sa.PrimaryKeyConstraint("competition_id", "agent_id", name=op.f("pk_competition_references")),
    )
    op.create_table(
        "board_ratings",
        sa.Column("board", sa.String(length=64), nullable=False),
        *rating_columns(),
        _fk("board_ratings", "agent_id", "agents.id", "CASCADE"),
        _fk("board_ratings", "env_id", "envs.id"),
        sa.PrimaryKeyConstraint("board", "agent_id", "role", name=op.f("pk_board_ratings")),
    )
    op.create_index("ix_board_ratings_board_role_conservative", "board_ratings", ["board", "role", "conservative"])


def downgrade() -> None:
    op.drop_index("ix_board_ratings_board_role_conservative", table_name="board_ratings")
    op.drop_table("board_ratings")
    op.drop_table("competition_references")
    op.drop_index("ix_competition_entries_team_id_submitted_at", table_name="competition_entries")
    op.drop_table("competition_entries")
    op.drop_index(op.f("ix_competition_team_members_team_id"), table_name="competition_team_members")
    op.drop_table("competition_team_members")
    op.drop_table("competition_teams")
    op.drop_index(op.f("ix_competition_members_user_id"), table_name="competition_members")
    op.drop_table("competition_members")
    op.drop_table("competition_organizers")
    op.drop_index(op.f("ix_competitions_env_id"), table_name="competitions")
    op.drop_table("competitions")
    op.drop_index("ix_matches_board_seq", table_name="matches")
    with op.batch_alter_table("matches", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("board")
