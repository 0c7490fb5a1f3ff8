"""An agent's files on the user's disk: the weights and the spec JSON beside them.

What an upload reads (:func:`weights_path`, :func:`read_file`, :func:`spec_text`: used by
:meth:`arena.client.ArenaClient.submit_agent` and :meth:`arena.client.LeagueClient.push_snapshot`)
and what a download writes (:func:`pulled_paths`, :func:`validate_download`,
:func:`holds`: :meth:`arena.client.ArenaClient.pull_agent`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs.errors import ArenaError

__all__ = ["holds", "pulled_paths", "read_file", "spec_text", "validate_download", "weights_path"]


def weights_path(path: Path) -> Path:
    """The weights file a path names: itself, or for ``x.json`` the ``x.safetensors`` or
    ``x.onnx`` beside it (the safetensors one when both exist)."""
    if path.suffix != ".json":
        return path
    onnx = path.with_suffix(".onnx")
    safetensors = path.with_suffix(".safetensors")
    return onnx if onnx.exists() and not safetensors.exists() else safetensors


def read_file(path: Path, what: str) -> bytes:
    """The bytes of ``path``.

    Args:
        path: The file.
        what: What it is, for the message (``"weights file"``).

    Raises:
        ArenaError: It does not exist or cannot be read (the message names it).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ArenaError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise ArenaError(f"cannot read {what} {path}: {exc.strerror}") from None


def spec_text(spec: str | os.PathLike | bytes | Mapping[str, Any]) -> str:
    """The spec as JSON text, from a mapping, JSON text/bytes or a file path.

    Raises:
        ArenaError: A path that does not exist or cannot be read.
    """
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    if isinstance(spec, bytes | bytearray):
        return bytes(spec).decode("utf-8", errors="replace")
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        return spec
    path = Path(spec)
    return read_file(path, "spec file (expected beside the weights)").decode("utf-8", errors="replace")


def pulled_paths(out_dir: Path, stem: str, spec: Mapping[str, Any]) -> tuple[Path, Path]:
    """Where a pulled agent goes: ``<stem>.onnx`` or ``<stem>.safetensors``, and ``<stem>.json``.

    Raises:
        ArenaError: ``stem`` is not a plain file name.
    """
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ArenaError(f"file stem {stem!r} must be a plain file name")
    suffix = ".onnx" if spec.get("arch") == "onnx" else ".safetensors"
    return out_dir / f"{stem}{suffix}", out_dir / f"{stem}.json"


def validate_download(data: bytes, spec: Mapping[str, Any]) -> None:
    """Check downloaded weights as the ``file:`` loaders will (never trust a server's bytes).

    Raises:
        InvalidSubmission: What is wrong with them.
    """
    # numpy, safetensors and the env registry: only once there is something to check
    from agents.checkpoint_weights import DEFAULT_MAX_BYTES, check_weights

    if spec.get("arch") == "onnx":
        from agents.onnx_agents.policy import validate_onnx_bytes

        validate_onnx_bytes(data, dict(spec), DEFAULT_MAX_BYTES)
    else:
        check_weights(data, dict(spec), max_bytes=DEFAULT_MAX_BYTES)


def holds(path: Path, *, sha256: str | None = None, data: bytes | None = None) -> bool:
    """Whether ``path`` exists and holds the file whose sha256 is ``sha256`` (an empty one
    matches nothing), or exactly ``data``."""
    try:
        content = path.read_bytes()
    except OSError:
        return False
    if sha256 is not None:
        return bool(sha256) and hashlib.sha256(content).hexdigest() == sha256
    return content == data
