"""Durable copies of snapshots: what the Redis pool is rebuilt from when Redis loses data.

Redis holds the hot copy; a :class:`DurableStore` holds every snapshot and every pool
membership, so a flushed, restarted or evicting Redis costs a refetch, never a
snapshot. :class:`FileSnapshotStore` is the implementation on a local (or shared)
filesystem; another backend (e.g. SQL blobs) only has to implement the protocol.

File layout under ``root`` (``<data_dir>/snapshots``)::

    <sha[:2]>/<sha>.safetensors     weights bytes, exactly as hashed (.onnx for an ONNX
                                    model: the suffix follows the spec's arch)
    <sha[:2]>/<sha>.json            {"sha256", "spec", "meta", "created"}
    pools/<quoted pool>/<sha>       membership marker; contents: the score (integer µs)

Every file is written to a temporary name, fsynced and renamed, so a reader never sees
a half-written file and a crash leaves either the old state or the new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote

from agents.files import atomic_write
from arena.snapshots.formats import weights_suffix
from arena.snapshots.keys import check_pool_name, check_sha256

log = logging.getLogger(__name__)

__all__ = ["DurableStore", "FileSnapshotStore", "SnapshotRecord"]


@dataclass(frozen=True)
class SnapshotRecord:
    """What is known about a snapshot besides its weights.

    Attributes:
        sha256: Hex sha256 of the weights bytes (the snapshot's identity).
        spec: The checkpoint spec as its JSON dict (``CheckpointSpec.to_json()``).
        meta: Caller's JSON metadata (training step, league, parent, ...).
        created: Unix time of the first ``put``.
    """

    sha256: str
    spec: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the ``.json`` sidecar's contents)."""
        return {
            "sha256": self.sha256,
            "spec": self.spec,
            "meta": self.meta,
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotRecord:
        """Inverse of :meth:`to_json`."""
        return cls(
            sha256=check_sha256(data["sha256"]),
            spec=dict(data["spec"]),
            meta=dict(data.get("meta") or {}),
            created=float(data.get("created") or 0.0),
        )


class DurableStore(Protocol):
    """Where snapshots survive a Redis loss. Every method is idempotent."""

    def save(self, record: SnapshotRecord, weights: bytes) -> SnapshotRecord:
        """Store weights and record unless already stored (content-addressed).

        Returns the record as stored: the first ``save`` of a snapshot wins.
        """
        ...

    def load(self, sha256: str) -> tuple[bytes, SnapshotRecord] | None:
        """``(weights, record)``, or ``None`` if this snapshot was never stored."""
        ...

    def add_to_pool(self, pool: str, sha256: str, score: int) -> None:
        """Record that ``sha256`` is in ``pool`` with ``score``."""
        ...

    def remove_from_pool(self, pool: str, sha256: str) -> bool:
        """Forget the membership; ``True`` if it existed."""
        ...

    def pool_members(self, pool: str) -> dict[str, int]:
        """``{sha256: score}`` of one pool."""
        ...

    def pools(self) -> list[str]:
        """Names of the pools with at least one member."""
        ...


class FileSnapshotStore:
    """:class:`DurableStore` on a filesystem directory.

    Args:
        root: Directory of the store (``settings.snapshot_dir``); created if missing.
        fsync: fsync each file before renaming it into place (turn off only in tests).
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.fsync = fsync
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"FileSnapshotStore({str(self.root)!r})"

    def paths(self, sha256: str, suffix: str = ".safetensors") -> tuple[Path, Path]:
        """``(weights, record)`` file paths of a snapshot.

        Args:
            sha256: The snapshot.
            suffix: Of the bytes' file (:func:`~arena.snapshots.formats.weights_suffix`
                of its spec: ``.safetensors`` or ``.onnx``).
        """
        check_sha256(sha256)
        folder = self.root / sha256[:2]
        return folder / f"{sha256}{suffix}", folder / f"{sha256}.json"

    def _pool_dir(self, pool: str) -> Path:
        return self.root / "pools" / quote(check_pool_name(pool), safe="")

    def save(self, record: SnapshotRecord, weights: bytes) -> SnapshotRecord:
        """Write ``<sha>.safetensors`` (or ``.onnx``) then ``<sha>.json`` unless stored intact.

        Returns:
            The stored record: an existing ``.json`` (first save wins) or ``record``.
        """
        weights_path, record_path = self.paths(record.sha256, weights_suffix(record.spec))
        try:
            intact = hashlib.sha256(weights_path.read_bytes()).hexdigest() == record.sha256
        except FileNotFoundError:
            intact = False
        if not intact:  # missing, or damaged on disk: the caller's bytes repair it
            atomic_write(weights_path, weights, fsync=self.fsync)
        try:  # written last: its presence means the pair is whole
            return SnapshotRecord.from_json(json.loads(record_path.read_bytes()))
        except FileNotFoundError:
            pass
        except (KeyError, TypeError, ValueError) as e:
            log.warning("replacing unreadable durable record %s: %s", record_path, e)
        atomic_write(record_path, json.dumps(record.to_json()).encode(), fsync=self.fsync)
        return record

    def load(self, sha256: str) -> tuple[bytes, SnapshotRecord] | None:
        """Read a snapshot back; ``None`` if either file is missing.

        The caller checks the weights against ``sha256``; a record that is not valid
        JSON raises ``ValueError``. The record is read first: its spec names the file of
        the bytes.
        """
        _, record_path = self.paths(sha256)
        try:
            record = SnapshotRecord.from_json(json.loads(record_path.read_bytes()))
        except FileNotFoundError:
            return None
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"durable record {record_path} is unreadable: {e}") from None
        weights_path, _ = self.paths(sha256, weights_suffix(record.spec))
        try:
            weights = weights_path.read_bytes()
        except FileNotFoundError:
            return None
        return weights, record

    def add_to_pool(self, pool: str, sha256: str, score: int) -> None:
        """Write the membership marker (unchanged if it already holds ``score``)."""
        marker = self._pool_dir(pool) / check_sha256(sha256)
        data = str(int(score)).encode()
        try:
            if marker.read_bytes() == data:
                return
        except FileNotFoundError:
            pass
        atomic_write(marker, data, fsync=self.fsync)

    def remove_from_pool(self, pool: str, sha256: str) -> bool:
        """Delete the membership marker; ``True`` if it existed."""
        marker = self._pool_dir(pool) / check_sha256(sha256)
        try:
            marker.unlink()
        except FileNotFoundError:
            return False
        return True

    def pool_members(self, pool: str) -> dict[str, int]:
        """``{sha256: score}`` read from the markers (temporary files skipped)."""
        folder = self._pool_dir(pool)
        members: dict[str, int] = {}
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return members
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                members[check_sha256(entry.name)] = int(Path(entry.path).read_bytes())
            except (ValueError, FileNotFoundError) as e:  # removed meanwhile, or foreign file
                log.debug("skipping pool marker %s: %s", entry.path, e)
        return members

    def pools(self) -> list[str]:
        """Pool names that have a marker directory with at least one member."""
        folder = self.root / "pools"
        if not folder.is_dir():
            return []
        return sorted(
            unquote(entry.name)
            for entry in os.scandir(folder)
            if entry.is_dir() and any(not n.startswith(".") for n in os.listdir(entry.path))
        )
