"""Arena on the user's machine: everything here runs without the server's code.

::

    from arena.client import ArenaClient, LeagueClient

    with ArenaClient("http://127.0.0.1:8000") as arena:
        agent = arena.submit_agent("agent.onnx", name="first try")
        arena.wait_until_rated(agent["id"])

What lives where:

- :mod:`~arena.client.http`: :class:`ArenaClient`, the HTTP API's client, joined from its
  endpoint groups (:mod:`~arena.client.transport`: requests and errors,
  :mod:`~arena.client.agents`, :mod:`~arena.client.matches`), and :func:`submit_until_rated`.
- :mod:`~arena.client.errors`, :mod:`~arena.client.tokens` (server URL, the saved API token),
  :mod:`~arena.client.progress` (a submission's progress in one line),
  :mod:`~arena.client.files` (an agent's weights and spec on disk).
- :mod:`~arena.client.league`: :class:`LeagueClient`, train anywhere in one of Arena's leagues.
- :mod:`~arena.client.published`: ``arena:<id>@<url>`` opponents, downloaded into a cache.
- :mod:`~arena.client.onnx_export`: a Stable-Baselines3 or torch policy as a validated ONNX
  submission (imports torch; import it from there).
- :mod:`~arena.client.connected`: play a connected agent from your own process (imports
  websockets; ``ArenaClient.connect`` imports it on use).

The client never imports the service (arena.api, arena.ladder, arena.storage, ...): only
``envs`` (the games and their errors), ``agents`` (checkpoints and ONNX checks, to validate
what it downloads or exports) and the wire protocol shared with the server
(:mod:`arena.connected.protocol`).
"""

from arena.client.errors import ArenaConnectionError, ArenaHTTPError, ArenaTimeout
from arena.client.http import ArenaClient, submit_until_rated
from arena.client.league import LeagueClient, Opponent, tally
from arena.client.progress import placement_progress, progress_printer
from arena.client.tokens import DEFAULT_SERVER, default_server, load_token, save_token, token_path

__all__ = [
    "DEFAULT_SERVER",
    "ArenaClient",
    "ArenaConnectionError",
    "ArenaHTTPError",
    "ArenaTimeout",
    "LeagueClient",
    "Opponent",
    "default_server",
    "load_token",
    "placement_progress",
    "progress_printer",
    "save_token",
    "submit_until_rated",
    "tally",
    "token_path",
]
