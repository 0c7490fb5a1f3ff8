"""Accounts in the browser: password hashes, browser sessions and API-token rotation.

Like API tokens, a session is stored only as the sha256 hex of the random id its
cookie carries (:func:`~arena.storage.db.repositories.users.hash_token`); a password
only as the hash the caller computed (argon2id, :mod:`arena.api.passwords`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from arena.storage.db.base import utcnow
from arena.storage.db.models import ApiToken, User, WebSession
from arena.storage.db.repositories.users import UserInfo, hash_token

_USER_COLUMNS = (User.id, User.name, User.is_admin, User.created_at)


def set_password_hash(session: Session, user_id: int, password_hash: str | None) -> None:
    """Stores ``password_hash`` (already hashed) as ``user_id``'s password; ``None`` removes it."""
    session.execute(update(User).where(User.id == user_id).values(password_hash=password_hash)
                    .execution_options(synchronize_session=False))


def user_with_password(session: Session, name: str) -> tuple[UserInfo, str | None] | None:
    """The user called ``name`` and its stored password hash (``None``: it has none), or ``None``."""
    row = session.execute(select(*_USER_COLUMNS, User.password_hash).where(User.name == name)).first()
    return None if row is None else (UserInfo(*row[:4]), row[4])


def password_hash_of(session: Session, user_id: int) -> str | None:
    """``user_id``'s stored password hash (``None``: none, or no such user)."""
    return session.execute(select(User.password_hash).where(User.id == user_id)).scalar()


def create_web_session(session: Session, user_id: int, session_id: str, expires_at: datetime) -> None:
    """Stores the hash of a new browser session's id for ``user_id``, valid until ``expires_at``."""
    session.add(WebSession(user_id=user_id, session_hash=hash_token(session_id), expires_at=expires_at))
    session.flush()


def user_for_session(session: Session, session_id: str, now: datetime | None = None) -> UserInfo | None:
    """The user of a stored, unexpired browser session, or ``None``."""
    stmt = (
        select(*_USER_COLUMNS)
        .join(WebSession, WebSession.user_id == User.id)
        .where(WebSession.session_hash == hash_token(session_id), WebSession.expires_at > (now or utcnow()))
    )
    row = session.execute(stmt).first()
    return None if row is None else UserInfo(*row)


def delete_web_session(session: Session, session_id: str) -> bool:
    """Deletes a browser session (signing out); returns whether there was one."""
    stmt = delete(WebSession).where(WebSession.session_hash == hash_token(session_id))
    return session.execute(stmt.execution_options(synchronize_session=False)).rowcount > 0


def delete_expired_sessions(session: Session, now: datetime | None = None) -> int:
    """Deletes every expired browser session; returns how many."""
    stmt = delete(WebSession).where(WebSession.expires_at <= (now or utcnow()))
    return session.execute(stmt.execution_options(synchronize_session=False)).rowcount


def delete_user_sessions(session: Session, user_id: int, *, keep: str | None = None) -> int:
    """Deletes ``user_id``'s browser sessions but ``keep`` (a session id); returns how many."""
    stmt = delete(WebSession).where(WebSession.user_id == user_id)
    if keep is not None:
        stmt = stmt.where(WebSession.session_hash != hash_token(keep))
    return session.execute(stmt.execution_options(synchronize_session=False)).rowcount


def rotate_api_token(session: Session, user_id: int, token: str) -> int:
    """Revokes every live API token of ``user_id`` and stores ``token``'s hash instead.

    Returns:
        How many tokens were revoked.
    """
    revoked = session.execute(
        update(ApiToken).where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow()).execution_options(synchronize_session=False)).rowcount
    session.add(ApiToken(user_id=user_id, token_hash=hash_token(token)))
    session.flush()
    return revoked
