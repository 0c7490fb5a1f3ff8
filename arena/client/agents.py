"""The agent endpoints: submit, list, publish, download and wait for a rating.

:class:`AgentEndpoints` is one of the groups :class:`arena.client.ArenaClient` joins; the
files it reads and writes are :mod:`arena.client.files`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from agents.files import atomic_write
from arena.client.errors import ArenaTimeout
from arena.client.files import holds, pulled_paths, read_file, spec_text, validate_download, weights_path
from arena.client.progress import placement_progress
from arena.client.transport import JSON, ApiTransport
from envs.errors import ArenaError

__all__ = ["AgentEndpoints", "upload_parts"]


class AgentEndpoints(ApiTransport):
    """``/agents``: an owner's uploads and anyone's reads of agents and their weights."""

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
        files, form = upload_parts(weights, spec, name, env)
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
        weights_file, spec_file = pulled_paths(Path(out_dir), stem or f"agent-{int(agent_id)}", spec)
        spec_bytes = (json.dumps(spec, indent=2) + "\n").encode()
        if holds(weights_file, sha256=sha) and holds(spec_file, data=spec_bytes):
            return weights_file  # already pulled: weights are immutable, identified by their sha256
        if not force and (weights_file.exists() or spec_file.exists()):
            raise ArenaError(f"{weights_file} or {spec_file} exists with other content; pass force=True (--force) "
                             "to overwrite, or another --out folder")
        data = self.agent_weights(agent_id)
        if sha and hashlib.sha256(data).hexdigest() != sha:
            raise ArenaError(f"agent {agent_id} changed while it was downloaded; try again")
        validate_download(data, spec)
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


def upload_parts(weights: str | os.PathLike | bytes, spec: str | os.PathLike | bytes | Mapping[str, Any] | None,
                 name: str | None, env: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The multipart ``(files, form)`` of an upload (``POST /agents``, a competition entry):
    see :meth:`AgentEndpoints.submit_agent` for the arguments."""
    filename = "agent.safetensors"
    if isinstance(weights, bytes | bytearray):
        data = bytes(weights)
    else:
        path = weights_path(Path(weights))
        data = read_file(path, "weights file")
        filename = path.name
        if spec is None:
            spec = path.with_suffix(".json")
    if spec is None:
        raise ArenaError("a spec is required when the weights are given as bytes")
    text = spec_text(spec)
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ArenaError(f"the agent spec is not valid JSON: {exc}") from None
    parsed = parsed if isinstance(parsed, dict) else {}
    env = env or parsed.get("env")
    if not env:
        raise ArenaError("no env given and the spec names none; pass env=... (--env)")
    if isinstance(weights, bytes | bytearray) and parsed.get("arch") == "onnx":
        filename = "agent.onnx"
    files = {"weights": (filename, data, "application/octet-stream")}
    form = {"spec": text, "env": env}
    if name:
        form["name"] = name
    return files, form
