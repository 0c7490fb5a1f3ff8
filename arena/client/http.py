"""A small synchronous Python client of the Arena HTTP API (``/api/v1``).

    from arena.client import ArenaClient

    with ArenaClient("http://127.0.0.1:8000") as arena:
        token = arena.create_user("ada")["token"]       # shown once; keep it
        arena.token = token
        agent = arena.submit_agent("agent.safetensors", name="first try")
        arena.wait_for_status(agent["id"], {"rated", "rejected"}, timeout=600)
        for row in arena.leaderboard("connect_four-v3")["data"]:
            print(row["rank"], row["name"], row["conservative"])

Every method returns the server's JSON as plain ``dict``/``list`` values (the same
names the API documents), so the client never lags behind the server's schema.
Paginated endpoints also have an ``iter_*`` generator that follows the pages.

Errors: a 4xx/5xx answer raises :class:`ArenaHTTPError` carrying the status and the
server's own ``detail`` message; an unreachable server raises
:class:`ArenaConnectionError` (:mod:`arena.client.errors`). Both derive from
:class:`envs.errors.ArenaError`.

The API token comes from the ``token`` argument, else ``ARENA_TOKEN``, else the saved
token file (:mod:`arena.client.tokens`). The endpoints come in groups, one module each:
the plumbing (:mod:`arena.client.transport`), the agents (:mod:`arena.client.agents`),
results (:mod:`arena.client.matches`), competitions (:mod:`arena.client.competitions`);
:class:`ArenaClient` joins them and adds the
users, the service and the connected agents.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from arena.client.agents import AgentEndpoints
from arena.client.competitions import CompetitionEndpoints
from arena.client.matches import MatchEndpoints
from arena.client.tournaments import TournamentEndpoints
from arena.client.transport import JSON
from envs.errors import ArenaError

if TYPE_CHECKING:  # the protocol client (websockets, msgpack) is imported only by connect()
    from arena.client.connected.client import Progress
    from arena.client.connected.session import ConnectedSession

__all__ = ["ArenaClient", "submit_until_rated"]


class ArenaClient(AgentEndpoints, MatchEndpoints, CompetitionEndpoints, TournamentEndpoints):
    """Synchronous client of one Arena server.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000`` (default ``$ARENA_SERVER``).
        token: API token; default ``$ARENA_TOKEN`` or the token file
            (:func:`arena.client.tokens.load_token`).
        timeout: Seconds per request (connect, read and write each).
        transport: An httpx transport (e.g. ``httpx.ASGITransport(app)`` for in-process use).

    Attributes:
        token: The bearer token sent with every request (settable).
    """

    # -- users and service --------------------------------------------------------

    def health(self) -> JSON:
        """``GET /health``: liveness and the state of the services behind the API."""
        return self._get("/health")

    def create_user(self, name: str) -> JSON:
        """``POST /users``: ``{id, name, token}``; the token is shown only this once."""
        return self.request("POST", "/users", json={"name": name})

    def me(self) -> JSON:
        """``GET /users/me``: the user the token belongs to (checks the token)."""
        return self._get("/users/me")

    def envs(self) -> JSON:
        """``GET /envs``: ``{data: [env, ...], count}``."""
        return self._get("/envs")

    # -- connected agents ---------------------------------------------------------

    def register_connected(self, env: str, name: str, role: str | None = None) -> JSON:
        """``POST /agents/connected``: register an agent your own process plays (needs a token).

        The same ``name`` (and ``role``) of the same user finds the agent made the first
        time instead of making another.

        Returns:
            The agent (``AgentPublic``), plus ``created``: whether this call made it.
        """
        body: dict[str, Any] = {"env": env, "name": name}
        if role:
            body["role"] = role
        response = self._send("POST", "/agents/connected", json=body)
        return {**response.json(), "created": response.status_code == 201}

    def connect(
        self,
        act: Callable[..., Any] | None = None,
        *,
        env: str,
        name: str,
        role: str | None = None,
        batched: bool = False,
        request_act: Callable[[dict], Any] | None = None,
        text: bool = False,
        encoding: str = "msgpack",
        on_progress: Callable[[Progress], None] | None = None,
        max_matches: int | None = None,
        max_backoff_s: float = 30.0,
        background: bool = False,
    ) -> ConnectedSession:
        """Register connected agent ``name`` (or reuse it) and play it with ``act``.

        ::

            def act(obs, mask):                      # one row: observation, legal-action mask
                return int(mask.nonzero()[0][0])

            session = arena.connect(act, env="connect_four-v3", name="first-legal")  # until Ctrl-C
            print(session.agent["id"], session.progress.wins, session.progress.losses)

        The client answers every decision batch the server sends, reconnects with
        backoff when the connection drops, and stops when the server refuses the agent
        for good (a bad token, someone else's agent).

        Args:
            act: ``act(obs, mask) -> int`` per row, or with ``batched=True`` (or the
                :func:`arena.client.connected.batched` decorator) ``act(obs_batch, mask_batch)``
                returning one action per row.
            env: The env id.
            name: The agent's name (the same name reuses the agent).
            role: The role it plays in a role env (hider, seeker, ...).
            batched: ``act`` takes whole batches.
            request_act: Instead of ``act``: a function of the whole ``request`` message
                (seats, plies, ``text``), returning one action per row.
            text: Ask for text renderings of the observations (``request["text"]``).
            encoding: ``msgpack`` (binary frames) or ``json`` (text frames).
            on_progress: Called (from the playing thread) after every request and result.
            max_matches: Stop after this many finished matches.
            max_backoff_s: Longest wait between reconnects.
            background: Return at once with the session playing in a daemon thread
                (``session.stop()`` ends it); else play here until stopped or Ctrl-C.

        Returns:
            The :class:`~arena.client.connected.session.ConnectedSession` (``agent``, ``progress``).

        Raises:
            ArenaError: No token set.
            ArenaHTTPError: The registration was refused (bad token, unknown env or role).
            ConnectionRefused: (when not ``background``) the server refused the connection for good.
        """
        from arena.client.connected.client import AgentClient
        from arena.client.connected.session import ConnectedSession

        if not self.token:
            raise ArenaError("connecting an agent needs your API token: run `arena user create NAME` or "
                             "`arena login`, or set ARENA_TOKEN")
        agent = self.register_connected(env, name, role)
        created = bool(agent.pop("created"))
        client = AgentClient(self.base_url, self.token, agent["id"], act, batched=batched, request_act=request_act,
                             encoding=encoding, text=text, on_progress=on_progress, max_backoff_s=max_backoff_s,
                             max_matches=max_matches)
        session = ConnectedSession(agent, created, client)
        if background:
            return session.start()
        session.run()
        return session


def submit_until_rated(weights: str | os.PathLike, server: str | None = None, token: str | None = None, *,
                       name: str | None = None, timeout: float = 600.0,
                       on_progress: Callable[[JSON], None] | None = None) -> JSON:
    """Upload an agent file (its spec JSON beside it) and wait until the server has rated it.

    Args:
        weights: The ``.onnx`` or ``.safetensors`` file.
        server: The Arena server (default ``$ARENA_SERVER``).
        token: API token (default ``$ARENA_TOKEN``, else the saved token file).
        name: Display name (default: the spec's).
        timeout: Seconds to wait for ``rated`` after the upload.
        on_progress: Called with the agent after the upload and every poll
            (e.g. :func:`arena.client.progress.progress_printer`).

    Returns:
        The rated agent.

    Raises:
        ArenaError: No token, an unreachable server, a refused upload, a rejected agent, or
            (:class:`ArenaTimeout`) not rated in time; the message says which.
    """
    with ArenaClient(server, token=token) as client:
        agent = client.submit_agent(weights, name=name)
        if on_progress is not None:
            on_progress(agent)
        return client.wait_until_rated(agent["id"], timeout, on_progress=on_progress)
