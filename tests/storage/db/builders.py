"""Row builders shared by the database tests."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from arena.storage.db import repositories as repo
from envs.registry import get_spec
from league.ratings.rating import RatingEnv

ENV = "connect_four-v3"
RATING = RatingEnv().to_json()


def setup_env(session: Session, env_id: str = ENV, keys: tuple[str, ...] = ("a", "b")) -> dict[str, int]:
    """Registers ``env_id`` and builtin agents ``keys``; returns their ids."""
    repo.ensure_env(session, get_spec(env_id), RATING)
    return repo.get_or_create_agents(session, env_id, keys, "builtin")


def match(
    match_id: str | None = None,
    *,
    env_id: str = ENV,
    seats: tuple[str, str] = ("a", "b"),
    seed: int = 7,
    winner: int | None = 0,
    **overrides: Any,
) -> dict[str, Any]:
    """One ``insert_matches`` row (a short connect-four game won by ``winner``)."""
    row = {
        "id": match_id or str(uuid.uuid4()),
        "env_id": env_id,
        "seed": seed,
        "seats": list(seats),
        "actions": [[0, 3], [1, 4], [0, 3]],
        "scores": [1.0, -1.0] if winner == 0 else [-1.0, 1.0] if winner == 1 else [0.0, 0.0],
        "winner": winner,
        "termination": "normal",
    }
    row.update(overrides)
    return row


def participants(seq: int, ids: dict[str, int], seats: tuple[str, str], winner: int | None):
    """``insert_participants`` rows of a two-seat match."""
    result = {None: ("D", "D"), 0: ("W", "L"), 1: ("L", "W")}[winner]
    return [
        {"match_seq": seq, "seat": s, "agent_id": ids[key], "team": s, "role": "player",
         "score": {"W": 1.0, "D": 0.0, "L": -1.0}[result[s]], "result": result[s]}
        for s, key in enumerate(seats)
    ]
