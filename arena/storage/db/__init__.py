"""Arena's database: SQLAlchemy models, repositories and Alembic migrations.

Works on SQLite (development, tests, single machine) and PostgreSQL (the service)::

    from arena.storage.db import make_engine, session_factory, upgrade
    from arena.storage.db import repositories as repo

    upgrade(url)                                  # schema to the latest revision
    sessions = session_factory(make_engine(url))  # a Sessions
    with sessions() as session:                   # reads
        n = repo.count_matches(session, env_id)
    seqs = sessions.write_transaction(            # commits; retried while others write
        lambda session: repo.insert_matches(session, [repo.match_row(r) for r in records]),
        what="recording matches", idempotent=True)

The match log is the source of truth; ratings are derived from it (rebuild with
``repo.iter_matches``). All SQL lives in :mod:`arena.storage.db.repositories`.
"""

from arena.storage.db.base import Base, utcnow
from arena.storage.db.connection import Sessions, make_engine, session_factory
from arena.storage.db.migrate import current_revision, downgrade, head_revision, upgrade

__all__ = [
    "Base",
    "Sessions",
    "current_revision",
    "downgrade",
    "head_revision",
    "make_engine",
    "session_factory",
    "upgrade",
    "utcnow",
]
