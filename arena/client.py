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
:class:`ArenaConnectionError`. Both derive from :class:`envs.errors.ArenaError`.

The API token comes from the ``token`` argument, else the ``ARENA_TOKEN`` environment
variable, else the token file written by ``arena user create`` / ``arena login``
(:func:`token_path`: ``$ARENA_TOKEN_FILE``, else ``$XDG_CONFIG_HOME/arena/token``,
else ``~/.config/arena/token``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import httpx

from envs.errors import ArenaError

if TYPE_CHECKING:  # the protocol client (websockets, msgpack) is imported only by connect()
    from arena.connected.client import Progress
    from arena.connected.session import ConnectedSession

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SERVER",
    "ArenaClient",
    "ArenaConnectionError",
    "ArenaHTTPError",
    "ArenaTimeout",
    "default_server",
    "load_token",
    "placement_progress",
    "progress_printer",
    "save_token",
    "submit_until_rated",
    "token_path",
]

DEFAULT_SERVER = "http://127.0.0.1:8000"
API_PREFIX = "/api/v1"
USER_AGENT = "arena-client/0.1"

JSON = dict[str, Any]


class ArenaHTTPError(ArenaError):
    """The server answered with an error status.

    Attributes:
        status: The HTTP status code of the answer.
        detail: The server's message (its ``detail`` field), meant for the user.
        method: HTTP method of the failed request.
        url: URL of the failed request.
        body: The decoded JSON error body (``{}`` if there was none), e.g. a 409's
            ``existing_id``.
    """

    def __init__(self, status: int, detail: str, method: str = "", url: str = "",
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.detail = detail
        self.method = method
        self.url = url
        self.body = body or {}


class ArenaConnectionError(ArenaError):
    """The server could not be reached (not running, wrong URL, network down)."""


class ArenaTimeout(ArenaError, TimeoutError):
    """A wait (e.g. :meth:`ArenaClient.wait_for_status`) ran out of time."""


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


def _detail(response: httpx.Response) -> str:
    """The user-facing message of an error response."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:500] if text else response.reason_phrase or "error"
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):  # FastAPI request validation: [{loc, msg, type}, ...]
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc", ()) if p not in ("body", "query"))
                parts.append(f"{loc}: {item.get('msg', item)}" if loc else str(item.get("msg", item)))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return detail if isinstance(detail, str) else json.dumps(detail)


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the ``None`` ones."""
    return {k: v for k, v in values.items() if v is not None}


def placement_progress(agent: Mapping[str, Any]) -> str:
    """Where a submitted agent stands, in one line: its status, rated games and rating per role,
    its place in the queue, the matches expected until it settles, and what it waits for."""
    parts = [f"agent {agent.get('id')} {agent.get('status')}"]
    for rating in agent.get("ratings") or []:
        parts.append(f"{rating.get('role')}: {rating.get('games')} games, mu {rating.get('mu', 0):.2f} "
                     f"sigma {rating.get('sigma', 0):.2f}")
    if agent.get("queue_position"):
        parts.append(f"{agent['queue_position']} in the queue")
    if agent.get("expected_matches_to_settle"):
        parts.append(f"about {agent['expected_matches_to_settle']} more matches to settle")
    if agent.get("status_reason"):
        parts.append(str(agent["status_reason"]))
    return "; ".join(parts)


def progress_printer(write: Callable[[str], Any]) -> Callable[[JSON], None]:
    """An ``on_progress`` callback for the waits that writes :func:`placement_progress` when it changes."""
    last = [""]

    def show(agent: JSON) -> None:
        line = placement_progress(agent)
        if line != last[0]:
            last[0] = line
            write(line)

    return show


class ArenaClient:
    """Synchronous client of one Arena server.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000`` (default ``$ARENA_SERVER``).
        token: API token; default ``$ARENA_TOKEN`` or the token file (:func:`load_token`).
        timeout: Seconds per request (connect, read and write each).
        transport: An httpx transport (e.g. ``httpx.ASGITransport(app)`` for in-process use).

    Attributes:
        token: The bearer token sent with every request (settable).
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 30,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or default_server()).rstrip("/")
        self.token = token if token is not None else load_token()
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX,
            timeout=timeout,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __repr__(self) -> str:
        return f"ArenaClient({self.base_url!r}, token={'set' if self.token else 'unset'})"

    # -- plumbing ---------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; returns the decoded JSON body (``None`` for an empty body).

        Args:
            method: HTTP method.
            path: Path below ``/api/v1`` (e.g. ``"/agents/3"``).
            **kwargs: Passed to :meth:`httpx.Client.request` (``params``, ``json``, ...).

        Raises:
            ArenaHTTPError: The server answered 4xx/5xx.
            ArenaConnectionError: The server could not be reached.
        """
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One API call's successful response (errors raised as in :meth:`request`)."""
        headers = dict(kwargs.pop("headers", None) or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TimeoutException as exc:
            raise ArenaConnectionError(
                f"{method} {self.base_url}{API_PREFIX}{path} timed out ({exc.__class__.__name__})"
            ) from exc
        except httpx.TransportError as exc:
            raise ArenaConnectionError(
                f"cannot reach the Arena server at {self.base_url} ({exc}); is `arena serve` "
                "running there? Set --server or ARENA_SERVER to point elsewhere."
            ) from exc
        if response.is_error:
            detail = _detail(response)
            if response.status_code == 401 and not self.token:
                detail += "; no API token set: run `arena user create NAME` or `arena login`, or set ARENA_TOKEN"
            log.debug("%s %s -> %s: %s", method, response.url, response.status_code, detail)
            raise ArenaHTTPError(response.status_code, detail, method, str(response.url),
                                 _json_object(response))
        return response

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=_params(**params))

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

    # -- agents -----------------------------------------------------------------

    def submit_agent(
        self,
        weights: str | os.PathLike | bytes,
        spec: str | os.PathLike | bytes | Mapping[str, Any] | None = None,
        name: str | None = None,
        env: str | None = None,
    ) -> JSON:
        """``POST /agents``: upload a checkpoint or an ONNX model (needs a token).

        Args:
            weights: The ``.safetensors`` or ``.onnx`` path (its spec's ``arch`` must say
                ``"onnx"`` for a model), or the file's bytes. A ``.json`` spec path stands
                for the weights beside it.
            spec: The spec as a dict, JSON text/bytes, or a path; default: the ``.json``
                beside a ``weights`` path.
            name: Display name; default (chosen by the server) the spec's ``name``,
                else the agent key.
            env: Env id; default the spec's ``env``.

        Returns:
            The new agent (``id``, ``key``, ``status``, ``queue_position``, ...).
        """
        filename = "agent.safetensors"
        if isinstance(weights, bytes | bytearray):
            data = bytes(weights)
        else:
            path = _weights_path(Path(weights))
            data = _read_file(path, "weights file")
            filename = path.name
            if spec is None:
                spec = path.with_suffix(".json")
        if spec is None:
            raise ArenaError("a spec is required when the weights are given as bytes")
        spec_text = _spec_text(spec)
        try:
            parsed = json.loads(spec_text)
        except ValueError as exc:
            raise ArenaError(f"the agent spec is not valid JSON: {exc}") from None
        parsed = parsed if isinstance(parsed, dict) else {}
        env = env or parsed.get("env")
        if not env:
            raise ArenaError("no env given and the spec names none; pass env=... (--env)")
        if isinstance(weights, bytes | bytearray) and parsed.get("arch") == "onnx":
            filename = "agent.onnx"
        files = {"weights": (filename, data, "application/octet-stream")}
        form = {"spec": spec_text, "env": env}
        if name:
            form["name"] = name
        return self.request("POST", "/agents", files=files, data=form)

    def agent(self, agent_id: int) -> JSON:
        """``GET /agents/{id}``: one agent with its ratings and queue state."""
        return self._get(f"/agents/{int(agent_id)}")

    def agents(
        self,
        env: str | None = None,
        owner: str | int | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JSON:
        """``GET /agents``: ``{data, count}``, filtered by env, owner and status."""
        return self._get("/agents", env=env, owner=owner, status=status, limit=limit, offset=offset)

    def iter_agents(self, env: str | None = None, owner: str | int | None = None,
                    status: str | None = None, page_size: int = 100) -> Iterator[JSON]:
        """Every agent matching the filters, fetched ``page_size`` at a time."""
        offset = 0
        while True:
            page = self.agents(env, owner, status, limit=page_size, offset=offset)["data"]
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def delete_agent(self, agent_id: int) -> JSON | None:
        """``DELETE /agents/{id}``: retire one of your agents (needs its owner's token)."""
        return self.request("DELETE", f"/agents/{int(agent_id)}")

    def publish(self, agent_id: int, published: bool = True) -> JSON:
        """``PATCH /agents/{id}``: publish (or unpublish) one of your agents' weights; the agent."""
        return self.request("PATCH", f"/agents/{int(agent_id)}", json={"published": bool(published)})

    def agent_spec(self, agent_id: int) -> tuple[JSON, str]:
        """``GET /agents/{id}/spec``: ``(spec, sha256 of its weights)`` of a published agent (or yours)."""
        response = self._send("GET", f"/agents/{int(agent_id)}/spec")
        return response.json(), response.headers.get("X-Arena-Sha256", "")

    def agent_weights(self, agent_id: int) -> bytes:
        """``GET /agents/{id}/weights``: the weights file's bytes (safetensors or ONNX), checked
        against the sha256 the server sends with them."""
        response = self._send("GET", f"/agents/{int(agent_id)}/weights")
        data = response.content
        sha = response.headers.get("X-Arena-Sha256", "")
        if sha and hashlib.sha256(data).hexdigest() != sha:
            raise ArenaError(f"the weights of agent {agent_id} arrived damaged (sha256 mismatch); try again")
        return data

    def pull_agent(self, agent_id: int, out_dir: str | os.PathLike = ".", *, stem: str | None = None,
                   force: bool = False) -> Path:
        """Download a published agent (or one of yours) as ``<stem>.safetensors`` (or ``.onnx``)
        and ``<stem>.json`` in ``out_dir``, validated as ``file:`` opponents and submissions are.

        Args:
            agent_id: The agent.
            out_dir: Where the two files go (created if missing).
            stem: File name without suffix (default ``agent-<id>``).
            force: Overwrite files that exist with other content.

        Returns:
            The weights file's path (``file:<path>`` names it for ``arena.gym`` and ``arena play``).

        Raises:
            ArenaHTTPError: 403 for someone else's private agent, 404 for one without weights.
            InvalidSubmission: The downloaded files do not validate (nothing is written).
            ArenaError: The files exist with other content and ``force`` is not set.
        """
        spec, sha = self.agent_spec(agent_id)
        weights_file, spec_file = _pulled_paths(Path(out_dir), stem or f"agent-{int(agent_id)}", spec)
        spec_bytes = (json.dumps(spec, indent=2) + "\n").encode()
        if _same_file(weights_file, sha) and _same_bytes(spec_file, spec_bytes):
            return weights_file  # already pulled: weights are immutable, identified by their sha256
        if not force and (weights_file.exists() or spec_file.exists()):
            raise ArenaError(f"{weights_file} or {spec_file} exists with other content; pass force=True (--force) "
                             "to overwrite, or another --out folder")
        from agents.checkpoint import atomic_write  # torch: only once there is something to validate and write

        data = self.agent_weights(agent_id)
        if sha and hashlib.sha256(data).hexdigest() != sha:
            raise ArenaError(f"agent {agent_id} changed while it was downloaded; try again")
        _validate_download(data, spec)
        weights_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(weights_file, data)
        atomic_write(spec_file, spec_bytes)
        return weights_file

    def history(self, agent_id: int) -> JSON:
        """``GET /agents/{id}/history``: the agent's rating over time."""
        return self._get(f"/agents/{int(agent_id)}/history")

    def wait_for_status(
        self,
        agent_id: int,
        statuses: Collection[str] | str,
        timeout: float = 60.0,
        interval: float = 0.5,
        on_progress: Callable[[JSON], None] | None = None,
        max_interval: float = 5.0,
    ) -> JSON:
        """Polls ``GET /agents/{id}`` until its status is one of ``statuses``.

        Args:
            agent_id: The agent.
            statuses: Wanted statuses, e.g. ``{"rated", "rejected"}``.
            timeout: Seconds to wait at most.
            interval: Seconds between polls (grows to at most ``max_interval``).
            on_progress: Called with the agent after every poll (a progress display).
            max_interval: Longest pause between polls.

        Returns:
            The agent, as last fetched.

        Raises:
            ArenaTimeout: The agent did not reach any of ``statuses`` in time; the message
                says where it stands (:func:`placement_progress`).
        """
        wanted = {statuses} if isinstance(statuses, str) else set(statuses)
        deadline = time.monotonic() + timeout
        while True:
            agent = self.agent(agent_id)
            if on_progress is not None:
                on_progress(agent)
            if agent.get("status") in wanted:
                return agent
            left = deadline - time.monotonic()
            if left <= 0:
                raise ArenaTimeout(
                    f"agent {agent_id} is still {agent.get('status')!r} after {timeout:g} s "
                    f"(waiting for {', '.join(sorted(wanted))}): {placement_progress(agent)}"
                )
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, max_interval)

    def wait_until_rated(self, agent_id: int, timeout: float = 600.0,
                         on_progress: Callable[[JSON], None] | None = None) -> JSON:
        """Polls until the agent is ``rated`` (validated, placed, its sigma settled); the agent.

        Raises:
            ArenaError: It was rejected (with the server's reason) or retired instead.
            ArenaTimeout: Not rated within ``timeout`` seconds; says where it stands and that
                only a server running its background service (``arena serve``) rates agents.
        """
        try:
            agent = self.wait_for_status(agent_id, {"rated", "rejected", "retired"}, timeout, interval=0.25,
                                         on_progress=on_progress, max_interval=1.0)
        except ArenaTimeout as exc:
            raise ArenaTimeout(f"{exc}; a server rates agents only while its background service runs "
                               "(`arena serve` runs it); follow the agent with `arena agent show "
                               f"{agent_id}` or wait longer (a larger timeout)") from None
        if agent.get("status") != "rated":
            raise ArenaError(f"agent {agent_id} was {agent.get('status')}: "
                             f"{agent.get('status_reason') or 'no reason given'}")
        return agent

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
                :func:`arena.connected.batched` decorator) ``act(obs_batch, mask_batch)``
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
            The :class:`~arena.connected.session.ConnectedSession` (``agent``, ``progress``).

        Raises:
            ArenaError: No token set.
            ArenaHTTPError: The registration was refused (bad token, unknown env or role).
            ConnectionRefused: (when not ``background``) the server refused the connection for good.
        """
        from arena.connected.client import AgentClient
        from arena.connected.session import ConnectedSession

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

    # -- ratings and matches --------------------------------------------------------

    def leaderboard(self, env: str, role: str | None = None, limit: int = 50, offset: int = 0) -> JSON:
        """``GET /leaderboard``: ``{env, role, count, data: [rows best first]}``."""
        return self._get("/leaderboard", env=env, role=role, limit=limit, offset=offset)

    def iter_leaderboard(self, env: str, role: str | None = None, page_size: int = 100) -> Iterator[JSON]:
        """Every leaderboard row of ``env`` (and ``role``), best first."""
        offset = 0
        while True:
            page = self.leaderboard(env, role, limit=page_size, offset=offset)["data"]
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def matches(self, env: str | None = None, agent: int | None = None, cursor: str | None = None,
                limit: int = 50) -> JSON:
        """``GET /matches``: one newest-first page, ``{data, next_cursor}``.

        Pass the page's ``next_cursor`` back as ``cursor`` for the next page; it is
        ``None`` on the last page.
        """
        return self._get("/matches", env=env, agent=agent, cursor=cursor, limit=limit)

    def iter_matches(self, env: str | None = None, agent: int | None = None, page_size: int = 100,
                     max_items: int | None = None) -> Iterator[JSON]:
        """Match summaries newest first, following ``next_cursor`` across pages.

        Args:
            env: Only matches of this env.
            agent: Only matches this agent played.
            page_size: Matches per request.
            max_items: Stop after this many (``None``: the whole history).
        """
        cursor: str | None = None
        seen = 0
        while True:
            page = self.matches(env, agent, cursor, limit=page_size)
            for item in page["data"]:
                if max_items is not None and seen >= max_items:
                    return
                seen += 1
                yield item
            cursor = page.get("next_cursor")
            if not cursor or not page["data"]:
                return

    def match(self, match_id: str) -> JSON:
        """``GET /matches/{id}``: one match with its full record (actions, seed, ...)."""
        return self._get(f"/matches/{match_id}")

    def challenge(self, env: str, agents: list[int] | tuple[int, ...], matches: int = 2,
                  rated: bool = False, *, wait: bool = True, timeout: float = 600.0, interval: float = 0.25,
                  on_progress: Callable[[JSON], None] | None = None) -> JSON:
        """``POST /challenges``: queue ``matches`` between agents (one agent id per team); the
        server's background service plays them.

        Args:
            wait: Poll ``GET /challenges/{id}`` until it is done or failed.
            timeout: Seconds to wait at most.
            interval: Seconds between polls (grows to at most 2 s).
            on_progress: Called with the challenge after every poll (a progress bar).

        Returns:
            The challenge: ``{id, status, match_ids, recorded, results, rated, ...}``; with
            ``wait`` its status is ``done`` (``results`` filled) or ``failed`` (``error``).

        Raises:
            ArenaTimeout: ``wait`` and it was still queued or playing after ``timeout``.
        """
        body = {"env": env, "agents": [int(a) for a in agents], "matches": matches, "rated": rated}
        queued = self.request("POST", "/challenges", json=body)
        if not wait:
            return queued
        return self.wait_for_challenge(queued["id"], timeout=timeout, interval=interval, on_progress=on_progress)

    def challenge_status(self, challenge_id: str) -> JSON:
        """``GET /challenges/{id}``: a challenge's status, progress and (once done) results."""
        return self._get(f"/challenges/{challenge_id}")

    def wait_for_challenge(self, challenge_id: str, timeout: float = 600.0, interval: float = 0.25,
                           on_progress: Callable[[JSON], None] | None = None) -> JSON:
        """Polls ``GET /challenges/{id}`` until it is ``done`` or ``failed``; the challenge.

        Raises:
            ArenaTimeout: Still queued or playing after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            challenge = self.challenge_status(challenge_id)
            if on_progress is not None:
                on_progress(challenge)
            if challenge.get("status") in ("done", "failed"):
                return challenge
            left = deadline - time.monotonic()
            if left <= 0:
                raise ArenaTimeout(f"challenge {challenge_id} is still {challenge.get('status')!r} after "
                                   f"{timeout:g} s (is the server's background service running?)")
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, 2.0)

    def probe(self, agent_id: int, budget_env_steps: int | None = None, seed: int = 0) -> JSON:
        """``POST /agents/{id}/probes``: queue an exploitability probe (owner or admin); the probe."""
        body: dict[str, Any] = {"seed": seed}
        if budget_env_steps is not None:
            body["budget_env_steps"] = budget_env_steps
        return self.request("POST", f"/agents/{agent_id}/probes", json=body)

    def probes(self, agent_id: int, limit: int = 20) -> JSON:
        """``GET /agents/{id}/probes``: the agent's probes, newest first."""
        return self._get(f"/agents/{agent_id}/probes", limit=limit)

    def seats(self, env: str) -> JSON:
        """``GET /envs/{env}/seats``: results by seat, what the first move is worth."""
        return self._get(f"/envs/{env}/seats")

    def integrity(self, env: str) -> JSON:
        """``GET /admin/integrity``: integrity flags of an env's ladder (admin token)."""
        return self._get("/admin/integrity", env=env)

    def payoff(self, env: str, top: int | None = None) -> JSON:
        """``GET /envs/{env}/payoff``: the win-rate matrix of the ``top`` agents."""
        return self._get(f"/envs/{env}/payoff", top=top)


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
            (e.g. :func:`progress_printer`).

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


def _weights_path(path: Path) -> Path:
    """The weights file a path names: itself, or for ``x.json`` the ``x.safetensors`` or
    ``x.onnx`` beside it (the safetensors one when both exist)."""
    if path.suffix != ".json":
        return path
    onnx = path.with_suffix(".onnx")
    safetensors = path.with_suffix(".safetensors")
    return onnx if onnx.exists() and not safetensors.exists() else safetensors


def _pulled_paths(out_dir: Path, stem: str, spec: Mapping[str, Any]) -> tuple[Path, Path]:
    """Where :meth:`ArenaClient.pull_agent` writes: ``<stem>.onnx`` or ``.safetensors``, ``<stem>.json``."""
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ArenaError(f"file stem {stem!r} must be a plain file name")
    suffix = ".onnx" if spec.get("arch") == "onnx" else ".safetensors"
    return out_dir / f"{stem}{suffix}", out_dir / f"{stem}.json"


def _validate_download(data: bytes, spec: Mapping[str, Any]) -> None:
    """Check downloaded weights as the ``file:`` loaders will (never trust a server's bytes).

    Raises:
        InvalidSubmission: What is wrong with them.
    """
    from agents.checkpoint import DEFAULT_MAX_BYTES

    if spec.get("arch") == "onnx":
        from agents.onnx_agents.policy import validate_onnx_bytes

        validate_onnx_bytes(data, dict(spec), DEFAULT_MAX_BYTES)
    else:
        from agents.checkpoint import load_checkpoint_bytes

        load_checkpoint_bytes(data, dict(spec), max_bytes=DEFAULT_MAX_BYTES)


def _same_file(path: Path, sha256: str) -> bool:
    try:
        return bool(sha256) and hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def _read_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ArenaError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise ArenaError(f"cannot read {what} {path}: {exc.strerror}") from None


def _spec_text(spec: str | os.PathLike | bytes | Mapping[str, Any]) -> str:
    """The spec as JSON text, from a mapping, JSON text/bytes or a file path."""
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    if isinstance(spec, bytes | bytearray):
        return bytes(spec).decode("utf-8", errors="replace")
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        return spec
    path = Path(spec)
    return _read_file(path, "spec file (expected beside the weights)").decode("utf-8", errors="replace")


def __getattr__(name: str) -> Any:
    """``arena.client.LeagueClient``: the league API's client (:mod:`arena.league_client`), imported on use."""
    if name in ("LeagueClient", "Opponent"):
        import arena.league_client

        return getattr(arena.league_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
