"""Users and API tokens. Tokens are stored only as their sha256 hex digest."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from arena.storage.db.base import utcnow
from arena.storage.db.models import ApiToken, User
from arena.storage.db.repositories.dialect import chunks, insert_row


@dataclass(frozen=True)
class UserInfo:
    id: int
    name: str
    is_admin: bool
    created_at: datetime


def hash_token(token: str) -> str:
    """The stored form of an API token: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_user(session: Session, name: str, *, is_admin: bool = False) -> int:
    """Creates a user and returns its id (``IntegrityError`` if the name is taken)."""
    user = User(name=name, is_admin=is_admin)
    session.add(user)
    session.flush()
    return user.id


def get_user_by_name(session: Session, name: str) -> UserInfo | None:
    """The user called ``name``, or ``None``."""
    stmt = select(User.id, User.name, User.is_admin, User.created_at).where(User.name == name)
    row = session.execute(stmt).first()
    return None if row is None else UserInfo(*row)


def get_user(session: Session, user_id: int) -> UserInfo | None:
    """The user with id ``user_id``, or ``None``."""
    stmt = select(User.id, User.name, User.is_admin, User.created_at).where(User.id == user_id)
    row = session.execute(stmt).first()
    return None if row is None else UserInfo(*row)


def user_names(session: Session, user_ids: Collection[int]) -> dict[int, str]:
    """``{user id: name}`` for the given ids (unknown ids are left out)."""
    found: dict[int, str] = {}
    for part in chunks(list(set(user_ids))):
        stmt = select(User.id, User.name).where(User.id.in_(part))
        found.update({user_id: name for user_id, name in session.execute(stmt)})
    return found


def add_api_token(session: Session, user_id: int, token: str) -> int:
    """Stores the hash of ``token`` for ``user_id``; returns the token row's id.

    The token itself is never stored; ``IntegrityError`` if its hash already exists.
    """
    return insert_row(session, ApiToken(user_id=user_id, token_hash=hash_token(token)))


def user_for_token(session: Session, token: str) -> UserInfo | None:
    """The owner of a valid (stored, not revoked) token, or ``None``."""
    stmt = (
        select(User.id, User.name, User.is_admin, User.created_at)
        .join(ApiToken, ApiToken.user_id == User.id)
        .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
    )
    row = session.execute(stmt).first()
    return None if row is None else UserInfo(*row)


def revoke_api_token(session: Session, token: str) -> bool:
    """Revokes ``token``; returns whether a live token was revoked."""
    stmt = (
        update(ApiToken)
        .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return session.execute(stmt).rowcount > 0
