"""Which server the client talks to and the API token it sends.

The token comes from the ``token`` argument, else the ``ARENA_TOKEN`` environment
variable, else the token file written by ``arena user create`` / ``arena login``
(:func:`token_path`: ``$ARENA_TOKEN_FILE``, else ``$XDG_CONFIG_HOME/arena/token``,
else ``~/.config/arena/token``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_SERVER", "default_server", "load_token", "save_token", "token_path"]

DEFAULT_SERVER = "http://127.0.0.1:8000"


def default_server() -> str:
    """``$ARENA_SERVER`` or :data:`DEFAULT_SERVER`."""
    return os.environ.get("ARENA_SERVER") or DEFAULT_SERVER


def token_path() -> Path:
    """Where ``arena user create`` / ``arena login`` keep the API token."""
    override = os.environ.get("ARENA_TOKEN_FILE")
    if override:
        return Path(override).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "arena" / "token"


def load_token() -> str | None:
    """The token from ``$ARENA_TOKEN``, else the token file, else ``None``."""
    token = os.environ.get("ARENA_TOKEN", "").strip()
    if token:
        return token
    path = token_path()
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read the Arena token file %s: %s", path, exc)
        return None
    return token or None


def save_token(token: str) -> Path:
    """Writes ``token`` to :func:`token_path`, readable by this user only (0600).

    Returns:
        The path written.
    """
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Create with 0600 from the start: the token never exists world-readable, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_TRUNC
    return path

