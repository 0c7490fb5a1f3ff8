"""Opening a replay: it is kept from then on; a replay retention already dropped says so.

Replay retention (``ARENA_REPLAY_RETENTION_DAYS``, :mod:`arena.ladder.retention`)
empties the action lists of old matches that nobody ever opened. Every place that
shows a match's moves (the API's full record, the web match page, its frames) goes
through :func:`open_replay`, which marks the replay as requested (one small write,
the first time only) or raises :class:`~envs.errors.ReplayNotKept`.
"""

from __future__ import annotations

import functools

from sqlalchemy.orm import Session, sessionmaker

from arena.storage.db import repositories as repo
from arena.storage.retry import retry_transient
from envs.errors import ReplayNotKept

MARK_TIMEOUT_S = 5.0
"""How long a viewer waits to mark a replay as requested before showing it anyway."""


def _mark(sessions: sessionmaker[Session], match_id: str) -> None:
    with sessions.begin() as session:
        repo.mark_replay_requested(session, match_id)


def open_replay(session: Session, sessions: sessionmaker[Session], match: repo.StoredMatch) -> None:
    """Check that ``match``'s replay is still stored, and keep it from now on.

    Args:
        session: The request's read session.
        sessions: The database, for the (first-time) write.
        match: The stored match about to be shown with its moves.

    Raises:
        ReplayNotKept: Retention dropped its action list; the result is still shown elsewhere.
    """
    state = repo.replay_state(session, match.id)
    if state is None or state.requested:
        return
    if state.dropped:
        raise ReplayNotKept(f"the moves of match {match.id} were not kept: it is older than the replay "
                            "retention and nobody had opened it (its result and ratings are kept)")
    retry_transient(functools.partial(_mark, sessions, match.id), timeout_s=MARK_TIMEOUT_S,
                    what=f"keeping the replay of match {match.id}")
