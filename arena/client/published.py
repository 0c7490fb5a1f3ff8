"""``arena:<agent_id>@<url>`` opponents: a published agent of a running Arena, pulled into a cache.

The agent's weights and spec are downloaded through the API (``GET /api/v1/agents/{id}/spec``
and ``/weights``, :meth:`arena.client.ArenaClient.pull_agent`), checked against the sha256
the server names and validated as a ``file:`` opponent is, then loaded by the same ``file:``
loader. Nothing is ever unpickled: the files are safetensors (a registry architecture) or
ONNX. The cache (:func:`cache_dir`) keeps one folder per server; a second use asks the
server for the spec only and reuses the weights when their sha256 still matches.

A private agent can be used only by its owner (the API token of ``ARENA_TOKEN`` or the
saved token file); anyone else gets an error saying it is private.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from arena.client.errors import ArenaConnectionError, ArenaHTTPError
from arena.client.http import ArenaClient
from envs.errors import ArenaError, UnknownAgent

__all__ = ["ARENA_NAME", "cache_dir", "parse_arena_name", "pull_published"]

ARENA_NAME = re.compile(r"^arena:(?P<agent_id>\d{1,10})@(?P<url>https?://\S+)$")
_NOT_IN_FOLDER = re.compile(r"[^A-Za-z0-9.-]+")


def cache_dir() -> Path:
    """``$ARENA_CACHE_DIR``, else ``$XDG_CACHE_HOME/arena``, else ``~/.cache/arena``."""
    override = os.environ.get("ARENA_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "arena"


def parse_arena_name(name: str) -> tuple[int, str]:
    """``(agent id, server url)`` of ``arena:<agent_id>@<url>``.

    Raises:
        UnknownAgent: The name is malformed (the message shows the form).
    """
    match = ARENA_NAME.match(name)
    if match is None:
        raise UnknownAgent(f"{name!r}: an Arena agent is named arena:<agent_id>@<url>, "
                           "e.g. arena:12@http://127.0.0.1:8000")
    return int(match["agent_id"]), match["url"].rstrip("/")


def pull_published(name: str, cache: str | os.PathLike | None = None, token: str | None = None) -> Path:
    """Download the agent ``arena:<id>@<url>`` names (or reuse the cached copy); its weights path.

    Args:
        name: ``arena:<agent_id>@<url>``.
        cache: The cache folder (default :func:`cache_dir`).
        token: API token (default ``ARENA_TOKEN`` or the saved token file); needed only for
            your own private agents.

    Returns:
        The validated weights file (its spec JSON beside it): ``file:<path>`` loads it.

    Raises:
        UnknownAgent: The server refused (private, no weights, unknown id) or cannot be reached.
        InvalidSubmission: The downloaded files do not validate.
    """
    agent_id, url = parse_arena_name(name)
    folder = Path(cache) if cache is not None else cache_dir()
    folder = folder / "agents" / _NOT_IN_FOLDER.sub("_", url.split("://", 1)[1]).strip("_")
    try:
        with ArenaClient(url, token=token) as client:
            return client.pull_agent(agent_id, folder, force=True)
    except ArenaHTTPError as exc:
        why = ("it is private: its owner has not published it (only they and admins may download it)"
               if exc.status == 403 else exc.detail)
        raise UnknownAgent(f"{name}: cannot fetch agent {agent_id} from {url}: {why}") from None
    except ArenaConnectionError as exc:
        raise UnknownAgent(f"{name}: {exc}") from None
    except ArenaError as exc:
        if type(exc) is ArenaError:
            raise UnknownAgent(f"{name}: {exc}") from None
        raise
