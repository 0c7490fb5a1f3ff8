"""The role an agent plays: ``agents.role``.

One submitted policy plays one role for its whole team (a hider, a seeker, a
predator, ...). ``NULL`` means every role of the env: the scripted ``random`` baseline
and every agent of a symmetric env (where the only role is ``player``). Neural agents
registered before this revision get the role their snapshot's spec names.

Written 2026-11-24; revision 0005_roles follows 0004_phases.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_roles"
down_revision = "0004_phases"


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("role", sa.String(32), nullable=True))
    agents = sa.table("agents", sa.column("id", sa.Integer()), sa.column("role", sa.String(32)),
                      sa.column("snapshot_sha256", sa.String(64)))
    snapshots = sa.table("snapshots", sa.column("sha256", sa.String(64)), sa.column("spec", sa.JSON()))
    bind = op.get_bind()
    rows = bind.execute(sa.select(agents.c.id, snapshots.c.spec)
                        .join(snapshots, snapshots.c.sha256 == agents.c.snapshot_sha256)).all()
    for agent_id, spec in rows:
        role = (spec or {}).get("role") if isinstance(spec, dict) else None
        if role:
            bind.execute(agents.update().where(agents.c.id == agent_id).values(role=role))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("role")
