"""Connected agents and people: agent kinds ``connected`` and ``human``.

A connected agent has no weights: its owner's process plays it over the connected-agent
protocol (docs/connected.md); a ``human`` agent is a person playing in the browser.
Only the CHECK constraint on ``agents.kind`` changes. On SQLite the constraint's text
is edited in the schema in place (SQLite's documented way to change a CHECK
constraint): rebuilding ``agents`` would trip the foreign keys that point at it.

Written 2026-11-26; revision 0008_connected follows 0007_retention.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_connected"
down_revision = "0007_retention"

OLD = "kind IN ('builtin', 'neural')"
NEW = "kind IN ('builtin', 'neural', 'connected', 'human')"


def _replace_check(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        version = bind.exec_driver_sql("PRAGMA schema_version").scalar()
        bind.exec_driver_sql("PRAGMA writable_schema = ON")
        bind.execute(sa.text("UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
                             "WHERE type = 'table' AND name = 'agents'"), {"old": old, "new": new})
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")
        return
    op.drop_constraint(op.f("ck_agents_kind"), "agents", type_="check")
    op.create_check_constraint(op.f("ck_agents_kind"), "agents", sa.text(new))


def upgrade() -> None:
    _replace_check(OLD, NEW)


def downgrade() -> None:
    op.execute("DELETE FROM agents WHERE kind IN ('connected', 'human')")
    _replace_check(NEW, OLD)
