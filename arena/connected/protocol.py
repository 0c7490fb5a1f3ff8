"""The connected-agent wire protocol, version 1: messages, encodings and their checks.

A connected agent's process holds one WebSocket (``/api/v1/agents/{id}/connect``) and
answers decision batches. Every message is a map with a ``type``. Binary frames are
msgpack, text frames JSON; a client picks one in its ``hello`` and the server answers
in the same (JSON carries arrays as nested lists, msgpack as raw little-endian
buffers). docs/connected.md describes every message for client authors.

Client -> server: ``hello`` (first frame: protocol, token, encoding, text, batch_results),
``answer`` (one action per row of a request), ``ping``.
Server -> client: ``welcome``, ``request`` (a decision batch with its deadline),
``result`` (a finished match), ``results`` (several finished matches in one frame, to a
client whose ``hello`` asked for ``batch_results``), ``pong``, ``error`` (then, when fatal,
a close code).

Everything that arrives is checked here before anything acts on it: frame size,
type, field types, and that an answer matches its request row for row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

PROTOCOL_VERSION = 1
MAX_CLIENT_FRAME_BYTES = 64 * 1024
"""Largest frame a client may send (an answer to 4,096 rows fits many times over)."""
MAX_ROWS = 8192
"""Most rows in one decision batch."""

# Close codes (4000-4999 are the application's own).
CLOSE_PROTOCOL = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TAKEN_OVER = 4409
"""A newer connection of the agent took it over (the client should not reconnect)."""
CLOSE_TOO_MANY = 4429
CLOSE_IDLE = 4408
CLOSE_TOO_BIG = 1009

ENCODINGS = ("msgpack", "json")
RESULTS_PER_FRAME = 256
"""Most results in one ``results`` frame (a ladder batch's, at the service's batch of 1,024
matches, comes in four)."""


class ProtocolError(ValueError):
    """A client message the protocol does not allow (the text says what is wrong)."""


@dataclass(frozen=True)
class Hello:
    """The first client frame.

    Attributes:
        protocol: The version the client speaks (must be :data:`PROTOCOL_VERSION`).
        token: API token (absent when sent as ``Authorization: Bearer``).
        encoding: ``msgpack`` or ``json``: how the server writes to this client.
        text: Add a text rendering of every observation to requests.
        batch_results: Results that finish together come in one ``results`` frame (at most
            :data:`RESULTS_PER_FRAME`) instead of a ``result`` frame each.
    """

    protocol: int
    token: str | None
    encoding: str
    text: bool
    batch_results: bool = False


@dataclass(frozen=True)
class Answer:
    """One action per row of request ``id`` (``None`` where the client gave no integer)."""

    id: str
    actions: list[int | None]


def encode(message: dict[str, Any], encoding: str) -> bytes | str:
    """A server message as a frame: msgpack bytes, or JSON text (arrays as nested lists)."""
    if encoding == "msgpack":
        return msgpack.packb(message, use_bin_type=True)
    return json.dumps(_jsonable(message), separators=(",", ":"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        if value.keys() == {"dtype", "shape", "data"}:  # an array: nested lists
            return np.frombuffer(value["data"], dtype=value["dtype"]).reshape(value["shape"]).tolist()
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def pack_array(array: np.ndarray) -> dict[str, Any]:
    """An array as the protocol carries it: ``{"dtype", "shape", "data"}`` (little-endian)."""
    a = np.ascontiguousarray(array)
    if a.dtype == bool:
        a = a.view(np.uint8)
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {"dtype": a.dtype.str.lstrip("<|"), "shape": list(a.shape), "data": a.tobytes()}


def decode_frame(frame: bytes | str) -> dict[str, Any]:
    """A client frame as a map, or :class:`ProtocolError`."""
    size = len(frame.encode() if isinstance(frame, str) else frame)
    if size > MAX_CLIENT_FRAME_BYTES:
        raise ProtocolError(f"frame of {size} bytes is over the {MAX_CLIENT_FRAME_BYTES}-byte limit")
    try:
        if isinstance(frame, str):
            message = json.loads(frame)
        else:
            message = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the client's
        raise ProtocolError(f"frame is not valid {'JSON' if isinstance(frame, str) else 'msgpack'}: "
                            f"{type(exc).__name__}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("every message is a map with a string 'type'")
    return message


def parse_hello(message: dict[str, Any]) -> Hello:
    """Check the first frame."""
    if message.get("type") != "hello":
        raise ProtocolError(f"the first message must be 'hello', got {message.get('type')!r}")
    protocol = message.get("protocol")
    if protocol != PROTOCOL_VERSION:
        raise ProtocolError(f"this server speaks protocol {PROTOCOL_VERSION}; the client asked for {protocol!r}")
    token = message.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > 512):
        raise ProtocolError("'token' must be a string of at most 512 characters")
    encoding = message.get("encoding", "msgpack")
    if encoding not in ENCODINGS:
        raise ProtocolError(f"'encoding' must be one of {', '.join(ENCODINGS)}")
    text = message.get("text", False)
    if not isinstance(text, bool):
        raise ProtocolError("'text' must be true or false")
    batch_results = message.get("batch_results", False)
    if not isinstance(batch_results, bool):
        raise ProtocolError("'batch_results' must be true or false")
    return Hello(protocol, token, encoding, text, batch_results)


_RESULTS_HEAD = msgpack.Packer().pack_map_header(2) + b"".join(map(msgpack.packb, ("type", "results", "results")))
"""``{"type": "results", "results": `` in msgpack, up to the array's header."""


def results_frame(packed: list[bytes]) -> bytes:
    """The msgpack ``results`` frame of results each already packed as msgpack (as the engine
    publishes them): the map is written around them, not decoded and encoded again."""
    return _RESULTS_HEAD + msgpack.Packer().pack_array_header(len(packed)) + b"".join(packed)


def parse_answer(message: dict[str, Any], rows: int) -> Answer:
    """Check an ``answer`` against the size of its request (``rows``).

    A row whose action is not an integer is kept as ``None`` (that match forfeits with
    ``invalid_output``); a wrong row count rejects the whole answer.
    """
    actions = message.get("actions")
    if isinstance(actions, dict):  # a packed int array
        try:
            array = np.frombuffer(actions["data"], dtype=np.dtype(actions["dtype"]).newbyteorder("<"))
        except Exception:  # noqa: BLE001
            raise ProtocolError("'actions' as an array needs an integer 'dtype' and raw 'data'") from None
        if array.dtype.kind not in "iu":
            raise ProtocolError("'actions' as an array must have an integer dtype")
        actions = array.tolist()
    if not isinstance(actions, list):
        raise ProtocolError("'actions' must be a list with one integer per row")
    if len(actions) != rows:
        raise ProtocolError(f"the request had {rows} rows; the answer has {len(actions)} actions")
    clean = [a if isinstance(a, int) and not isinstance(a, bool) and -2**31 <= a < 2**31 else None
             for a in actions]
    return Answer(str(message.get("id")), clean)
