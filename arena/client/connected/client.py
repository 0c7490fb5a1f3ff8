"""The Python client of the connected-agent protocol: play an agent from your own process.

::

    from arena.client.connected.client import AgentClient
    AgentClient("http://127.0.0.1:8000", token, agent_id, act).run()

``act`` is either per row, ``act(obs, mask) -> int``, or batched (``batched=True``):
``act(obs_batch, mask_batch) -> actions``. The client answers every decision batch the
server sends, pings while idle, and reconnects with exponential backoff when the
connection drops (not when the server refuses it for good: a bad token, someone
else's agent). A row whose ``act`` raises is answered with no action: only that match
forfeits. ``arena connect`` and :meth:`arena.client.ArenaClient.connect` run this.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from arena.connected.protocol import (
    CLOSE_FORBIDDEN,
    CLOSE_NOT_FOUND,
    CLOSE_PROTOCOL,
    CLOSE_TAKEN_OVER,
    CLOSE_UNAUTHORIZED,
    PROTOCOL_VERSION,
)
from envs.errors import ArenaError
from league.results import count_result

log = logging.getLogger(__name__)

PING_EVERY_S = 20.0
FATAL_CLOSES = {CLOSE_UNAUTHORIZED, CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_PROTOCOL, CLOSE_TAKEN_OVER}
"""Close codes after which reconnecting cannot help (4409: a newer connection of the agent took it
over; reconnecting would only take it back, and the two would take turns)."""

RowAct = Callable[[np.ndarray, np.ndarray], int]
BatchAct = Callable[[np.ndarray, np.ndarray], Any]


class ConnectionRefused(ArenaError, RuntimeError):
    """The server refused the agent for good (the message says why)."""


def unpack_array(value: Any) -> np.ndarray:
    """A protocol array (``{"dtype", "shape", "data"}``, or nested lists in JSON) as numpy."""
    if isinstance(value, dict):
        return np.frombuffer(value["data"], dtype=np.dtype(value["dtype"]).newbyteorder("<")).reshape(value["shape"])
    return np.asarray(value)


@dataclass
class Progress:
    """What the client has done so far (shown by ``arena connect``)."""

    connected: bool = False
    connections: int = 0
    requests: int = 0
    rows: int = 0
    matches: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: int = 0
    last_error: str = ""
    results: list[dict] = field(default_factory=list)

    def record(self, result: dict[str, Any], team_of_seat: Callable[[int], int]) -> None:
        self.matches += 1
        count_result(self, result.get("winner"), team_of_seat(result["seats"][0]))
        if result.get("forfeit_seat") is not None and result["forfeit_seat"] in result["seats"]:
            self.forfeits += 1
        self.results.append(result)
        del self.results[:-100]


class AgentClient:
    """Plays connected agent ``agent_id`` until :meth:`stop` (or ``max_matches`` results).

    Args:
        server: Base URL of the Arena server (``http://...``; ``ws://`` is derived).
        token: The owner's API token.
        agent_id: The connected agent's id.
        act: The decision function (per row, or batched with ``batched=True``).
        batched: ``act`` takes whole batches (also when ``act`` is marked with
            :func:`arena.client.connected.batched`).
        request_act: Instead of ``act``, a function of the whole request message
            (adapters that need the seats or plies, e.g. Kaggle agents).
        encoding: ``msgpack`` (binary frames) or ``json``.
        text: Ask for text renderings of the observations (``request["text"]``).
        on_progress: Called after every request and result.
        max_backoff_s: Longest wait between reconnects.
        compression: ``"deflate"`` to ask for compressed frames (permessage-deflate: a request's
            observations shrink about tenfold, for a slow link), or ``None`` (the default): on a
            fast link compressing every frame costs the server and the client more time than
            the bytes it saves (benchmarks/connected.py).
    """

    def __init__(self, server: str, token: str, agent_id: int, act: RowAct | BatchAct | None = None, *,
                 batched: bool = False, request_act: Callable[[dict], list] | None = None,
                 encoding: str = "msgpack", text: bool = False,
                 on_progress: Callable[[Progress], None] | None = None, max_backoff_s: float = 30.0,
                 max_matches: int | None = None, compression: str | None = None) -> None:
        if (act is None) == (request_act is None):
            raise ValueError("give exactly one of act and request_act")
        base = server.rstrip("/")
        self.url = ("wss://" + base[8:] if base.startswith("https://") else "ws://" + base.split("://", 1)[-1])
        self.url += f"/api/v1/agents/{int(agent_id)}/connect"
        self.token, self.agent_id = token, agent_id
        self.act, self.request_act = act, request_act
        self.batched = batched or bool(getattr(act, "arena_batched", False))  # @arena.client.connected.batched
        self.encoding, self.text, self.compression = encoding, text, compression
        self.on_progress = on_progress
        self.max_backoff_s = max_backoff_s
        self.max_matches = max_matches
        self.progress = Progress()
        self.welcome: dict[str, Any] = {}
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> Progress:
        """Connect, play, reconnect with backoff; returns when stopped or refused for good.

        Raises:
            ConnectionRefused: A bad token, an agent that is not yours, or a protocol error.
        """
        backoff = 0.5
        while not self._stop.is_set() and not self._done():
            try:
                self._session()
                backoff = 0.5
            except ConnectionRefused:
                raise
            except (OSError, ConnectionClosed, InvalidStatus, TimeoutError) as exc:
                self.progress.last_error = f"{type(exc).__name__}: {exc}"
                log.info("connection lost (%s); reconnecting in %.1fs", self.progress.last_error, backoff)
            self.progress.connected = False
            self._notify()
            if self._stop.is_set() or self._done():
                break
            if self._stop.wait(backoff * (0.5 + random.random())):
                break
            backoff = min(self.max_backoff_s, backoff * 2)
        return self.progress

    def _done(self) -> bool:
        return self.max_matches is not None and self.progress.matches >= self.max_matches

    def _send(self, ws, message: dict[str, Any]) -> None:
        ws.send(msgpack.packb(message, use_bin_type=True) if self.encoding == "msgpack" else json.dumps(message))

    @staticmethod
    def _decode(frame: bytes | str) -> dict[str, Any]:
        return json.loads(frame) if isinstance(frame, str) else msgpack.unpackb(frame, raw=False)

    def _session(self) -> None:
        with connect(self.url, max_size=256 * 1024 * 1024, open_timeout=10, close_timeout=2,
                     compression=self.compression, additional_headers={"Authorization": f"Bearer {self.token}"}) as ws:
            self._send(ws, {"type": "hello", "protocol": PROTOCOL_VERSION, "encoding": self.encoding,
                            "text": self.text, "batch_results": True})
            try:
                first = self._decode(ws.recv(timeout=15))
            except ConnectionClosed as exc:
                self._closed(exc)
                raise
            if first.get("type") != "welcome":
                raise ConnectionRefused(first.get("detail", f"unexpected first message {first.get('type')!r}"))
            self.welcome = first
            self.progress.connected = True
            self.progress.connections += 1
            self._notify()
            last_sent = time.monotonic()
            while not self._stop.is_set() and not self._done():
                try:
                    frame = ws.recv(timeout=1.0)
                except TimeoutError:
                    if time.monotonic() - last_sent >= PING_EVERY_S:
                        self._send(ws, {"type": "ping"})
                        last_sent = time.monotonic()
                    continue
                except ConnectionClosed as exc:
                    self._closed(exc)
                    raise
                message = self._decode(frame)
                kind = message.get("type")
                if kind == "request":
                    self._send(ws, {"type": "answer", "id": message["id"], "actions": self._answer(message)})
                    last_sent = time.monotonic()
                    self.progress.requests += 1
                    self.progress.rows += len(message["matches"])
                elif kind == "result":
                    self.progress.record(message, self._team_of)
                elif kind == "results":  # several that finished together (the hello asked for them so)
                    for result in message["results"]:
                        self.progress.record(result, self._team_of)
                elif kind == "error":
                    self.progress.last_error = message.get("detail", "")
                    log.warning("server: %s", self.progress.last_error)
                self._notify()

    def _closed(self, exc: ConnectionClosed) -> None:
        rcvd = exc.rcvd
        if rcvd is not None and rcvd.code in FATAL_CLOSES:
            raise ConnectionRefused(f"the server refused agent {self.agent_id}: {rcvd.reason or rcvd.code}") from exc

    def _team_of(self, seat: int) -> int:
        seat_team = self.welcome.get("seat_team") or []
        return seat_team[seat] if seat < len(seat_team) else seat

    def _answer(self, request: dict[str, Any]) -> list[int | None]:
        k = len(request["matches"])
        if self.request_act is not None:
            try:
                return _clean(self.request_act(request), k)
            except Exception:  # only these rows forfeit; the connection stays up
                log.exception("request_act raised on a request of %d rows", k)
                return [None] * k
        obs, mask = unpack_array(request["obs"]), unpack_array(request["mask"]).astype(bool)
        if self.batched:
            try:
                return _clean(self.act(obs, mask), k)
            except Exception:
                log.exception("act raised on a batch of %d rows", k)
                return [None] * k
        out: list[int | None] = []
        for i in range(k):
            try:
                out.append(int(self.act(obs[i], mask[i])))
            except Exception:
                log.exception("act raised on row %d", i)
                out.append(None)
        return out

    def _notify(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)


def _clean(actions: Any, k: int) -> list[int | None]:
    if isinstance(actions, np.ndarray) and actions.dtype.kind in "iu":  # a batched act's usual answer
        if actions.size != k:
            raise ValueError(f"act returned {actions.size} actions for {k} rows")
        return actions.reshape(-1).tolist()
    values = np.asarray(actions, dtype=object).reshape(-1).tolist()
    if len(values) != k:
        raise ValueError(f"act returned {len(values)} actions for {k} rows")
    return [int(a) if isinstance(a, int | float | np.integer | np.floating) and float(a).is_integer() else None
            for a in values]
