"""Writing files so that a reader sees the old file or the whole new one, never half of it.

Checkpoints, ONNX models, the durable copies of snapshots, pulled agents and training
state are all written this way.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one.

    Args:
        path: Destination; its folder is created if missing.
        data: The bytes.
        fsync: Flush to disk before the rename (durable copies want this).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
