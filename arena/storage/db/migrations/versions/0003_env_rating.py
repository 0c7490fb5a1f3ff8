"""The TrueSkill constants of each env's ladder, stored with the env.

``arena ratings rebuild`` must replay the match log with the constants the ladder
used; storing them with the env makes that a fact of the database instead of a
convention of the code. Envs registered before this revision get the constants every
ladder used until then (the :class:`league.ratings.rating.RatingEnv` defaults).

Written 2026-11-24; revision 0003 follows 0002 (no branches, no dependencies).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

# The defaults of league.ratings.rating.RatingEnv at this revision, written out: a migration
# must not change meaning when the code's defaults change later.
_DEFAULT_RATING = {"mu": 25.0, "sigma": 25.0 / 3, "beta": 25.0 / 6, "tau": 25.0 / 300,
                   "draw_probability": 0.10}


def upgrade() -> None:
    with op.batch_alter_table("envs") as batch:
        batch.add_column(sa.Column("rating", sa.JSON(), nullable=True))
    envs = sa.table("envs", sa.column("rating", sa.JSON()))
    op.execute(envs.update().values(rating=_DEFAULT_RATING))


def downgrade() -> None:
    with op.batch_alter_table("envs") as batch:
        batch.drop_column("rating")
