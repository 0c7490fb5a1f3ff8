"""Showing a replay: a read changes nothing; only an owner's view keeps it.

Replay retention (``ARENA_REPLAY_RETENTION_DAYS``, :mod:`arena.ladder.retention`)
empties the action lists of old matches that no owner kept and the site does not link
(the first match of each phase of a league timeline, each agent's and each env's most
recent matches). Every place that shows a match's moves (the API's full record, its
frames, the web match page) goes through :func:`view_replay`, which raises
:class:`~arena.core.errors.ReplayNotKept` for a dropped replay and otherwise writes nothing,
unless the viewer is an authenticated owner of one of the match's agents (or an admin):
then the replay is marked kept (one small write, the first time only). An anonymous
read, a crawler's, leaves every row and key as it was, so it cannot keep what
retention would drop.
"""

from __future__ import annotations

import functools

from sqlalchemy.orm import Session, sessionmaker

from arena.core.errors import ReplayNotKept
from arena.storage.db import repositories as repo
from arena.storage.retry import retry_transient

MARK_TIMEOUT_S = 5.0
"""How long an owner waits to mark a replay as kept before it is shown anyway."""


def _mark(sessions: sessionmaker[Session], match_id: str) -> None:
    with sessions.begin() as session:
        repo.mark_replay_requested(session, match_id)


def _owns_a_seat(session: Session, match: repo.StoredMatch, user_id: int) -> bool:
    seats = repo.get_participants(session, match.seq)
    agents = repo.get_agents(session, {p.agent_id for p in seats})
    return any(a.owner_id == user_id for a in agents.values())


def view_replay(session: Session, sessions: sessionmaker[Session], match: repo.StoredMatch,
                viewer_id: int | None = None, *, admin: bool = False) -> None:
    """Check that ``match``'s replay is still stored; keep it if an owner is viewing it.

    Args:
        session: The request's read session.
        sessions: The database, for an owner's (first-time) write.
        match: The stored match about to be shown with its moves.
        viewer_id: The authenticated viewer's user id; ``None``: anonymous (nothing is written).
        admin: The viewer is an admin (keeps any replay it opens).

    Raises:
        ReplayNotKept: Retention dropped its action list; the result is still shown elsewhere.
    """
    state = repo.replay_state(session, match.id)
    if state is None or state.requested:
        return
    if state.dropped:
        raise ReplayNotKept(f"the moves of match {match.id} were not kept: it is older than the replay "
                            "retention and no owner of its agents had opened it (its result and ratings are kept)")
    if admin or (viewer_id is not None and _owns_a_seat(session, match, viewer_id)):
        retry_transient(functools.partial(_mark, sessions, match.id), timeout_s=MARK_TIMEOUT_S,
                        what=f"keeping the replay of match {match.id}")
