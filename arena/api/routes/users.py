"""``/users``: sign up (get a token) and ``/users/me``."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from arena.api.deps import ServicesDep, StateDep, UserDep, client_address
from arena.api.errors import error_responses
from arena.api.schemas import UserCreate, UserCreated, UserPublic
from arena.core.errors import Conflict
from arena.storage.db import repositories as repo

router = APIRouter(tags=["users"])


@router.post("/users", status_code=201, response_model=UserCreated,
             responses=error_responses(400, 409, 422, 429))
def create_user(body: UserCreate, request: Request, state: StateDep) -> UserCreated:
    """Create a user and its API token (shown only in this response; stored hashed)."""
    services = state.services
    state.limits.sign_up(client_address(request))
    token = f"arena_{secrets.token_urlsafe(32)}"
    taken = Conflict(f"the name {body.name!r} is taken; choose another")

    def create(session: Session) -> int:
        existing = repo.get_user_by_name(session, body.name)
        if existing is not None:
            taken.existing_id = existing.id
            raise taken
        user_id = repo.create_user(session, body.name)
        repo.add_api_token(session, user_id, token)
        return user_id

    try:
        user_id = services.sessions.write_transaction(create, what=f"creating user {body.name!r}")
    except IntegrityError:  # created concurrently between our check and insert (PostgreSQL)
        raise taken from None
    return UserCreated(id=user_id, name=body.name, token=token)


@router.get("/users/me", response_model=UserPublic, responses=error_responses(401))
def me(user: UserDep, services: ServicesDep) -> UserPublic:
    """The user the token belongs to."""
    if user.user_id is None:
        return UserPublic(id=0, name=user.name, is_admin=True)
    with services.sessions() as session:
        info = repo.get_user(session, user.user_id)
    assert info is not None  # the token lookup just found it
    return UserPublic(id=info.id, name=info.name, is_admin=info.is_admin, created_at=info.created_at)
