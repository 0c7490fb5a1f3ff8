"""Snapshots: frozen weights keyed by their sha256, with an optional durable copy.

The Redis snapshot pool is the fast path; the ``weights`` column is the durable copy
it can be refilled from. Listing never reads the weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from arena.storage.db.models import Snapshot
from arena.storage.db.repositories.dialect import dialect_insert


@dataclass(frozen=True)
class SnapshotInfo:
    sha256: str
    env_id: str
    league_id: int | None
    parent_sha256: str | None
    spec: dict[str, Any]
    size_bytes: int
    has_weights: bool
    created_at: datetime


def put_snapshot(
    session: Session,
    sha256: str,
    *,
    env_id: str,
    spec: Mapping[str, Any],
    weights: bytes | None = None,
    size_bytes: int | None = None,
    league_id: int | None = None,
    parent_sha256: str | None = None,
) -> bool:
    """Stores a snapshot unless one with this sha256 exists (snapshots are immutable).

    Args:
        session: The session (the caller commits).
        sha256: Hex sha256 of the weights bytes: the snapshot's identity.
        env_id: Env the weights play.
        spec: The checkpoint's JSON spec (arch, hparams, shapes).
        weights: The weights bytes, to keep a durable copy; checked against ``sha256``.
        size_bytes: Size of the weights; defaults to ``len(weights)``.
        league_id: League that produced the snapshot.
        parent_sha256: The snapshot it was trained from.

    Returns:
        Whether this call inserted it.

    Raises:
        ValueError: ``weights`` do not hash to ``sha256``, or no size is known.
    """
    if weights is not None:
        actual = hashlib.sha256(weights).hexdigest()
        if actual != sha256:
            raise ValueError(f"weights hash to {actual}, not to the given sha256 {sha256}")
        size_bytes = len(weights) if size_bytes is None else size_bytes
    if size_bytes is None:
        raise ValueError("give the weights or their size_bytes")
    table = Snapshot.__table__
    stmt = (
        dialect_insert(session, table)
        .values(
            sha256=sha256, env_id=env_id, league_id=league_id, parent_sha256=parent_sha256,
            spec=dict(spec), size_bytes=size_bytes, weights=weights,
        )
        .on_conflict_do_nothing(index_elements=["sha256"])
        .returning(table.c.sha256)
    )
    return session.execute(stmt).first() is not None


def get_snapshot_weights(session: Session, sha256: str) -> bytes | None:
    """The durable copy of a snapshot's weights (``None``: unknown or not kept)."""
    return session.execute(
        select(Snapshot.weights).where(Snapshot.sha256 == sha256)
    ).scalar_one_or_none()


def snapshot_specs(session: Session, sha256s: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{sha256: spec}`` of the given snapshots (one query; unknown ones are left out)."""
    wanted = sorted(set(sha256s))
    if not wanted:
        return {}
    rows = session.execute(select(Snapshot.sha256, Snapshot.spec).where(Snapshot.sha256.in_(wanted)))
    return {sha: dict(spec) for sha, spec in rows}


def list_snapshots(
    session: Session, env_id: str | None = None, league_id: int | None = None
) -> list[SnapshotInfo]:
    """Snapshots (of an env and/or a league), oldest first, without their weights."""
    stmt = select(
        Snapshot.sha256, Snapshot.env_id, Snapshot.league_id, Snapshot.parent_sha256,
        Snapshot.spec, Snapshot.size_bytes, Snapshot.weights.is_not(None),
        Snapshot.created_at,
    ).order_by(Snapshot.created_at, Snapshot.sha256)
    if env_id is not None:
        stmt = stmt.where(Snapshot.env_id == env_id)
    if league_id is not None:
        stmt = stmt.where(Snapshot.league_id == league_id)
    return [SnapshotInfo(*row) for row in session.execute(stmt)]
