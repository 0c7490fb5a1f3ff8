"""One probe of an agent at a budget while it has not failed: a partial unique index.

``queue_probe`` returns the queued, running or done probe of an agent at a budget
instead of queueing another; the index makes that hold when requests race (issue 29
item 5). Probes that concurrent requests already doubled are failed first (the newer
of each pair, with the reason), so the index can be built.

Written 2026-11-28; revision 0012_one_probe follows 0011_competitions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_one_probe"
down_revision = "0011_competitions"

INDEX = "uq_probes_agent_id_budget_env_steps"
ACTIVE = "status <> 'failed'"


def upgrade() -> None:
    op.execute(sa.text(
        "UPDATE probes SET status = 'failed', error = 'a duplicate of an earlier probe at this budget' "
        "WHERE status <> 'failed' AND EXISTS (SELECT 1 FROM probes AS earlier WHERE "
        "earlier.agent_id = probes.agent_id AND earlier.budget_env_steps = probes.budget_env_steps "
        "AND earlier.status <> 'failed' AND earlier.id < probes.id)"))
    op.create_index(INDEX, "probes", ["agent_id", "budget_env_steps"], unique=True,
                    postgresql_where=sa.text(ACTIVE), sqlite_where=sa.text(ACTIVE))


def downgrade() -> None:
    op.drop_index(INDEX, table_name="probes")
