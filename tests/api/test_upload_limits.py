"""Upload limits are enforced while reading: oversized bodies are refused early.

These tests drive the ASGI app directly with a ``receive`` that counts the body bytes
the server actually pulled, which a test client cannot show (it sends everything).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from arena.api import create_app
from tests.api.conftest import UPLOAD_LIMIT
from tests.api.helpers import API, ENV, new_user

CHUNK = 1024
HUGE = 1 << 20  # what the client would send if nobody stopped it: 256 times the limit


class Upload:
    """One request played against the app; ``pulled`` counts body bytes the app read."""

    def __init__(self, app, headers: dict[str, str], body: Iterator[bytes]) -> None:
        self.app, self.headers, self.body = app, headers, body
        self.pulled = 0
        self.status: int | None = None
        self.response = b""

    async def _receive(self) -> dict:
        chunk = next(self.body, None)
        if chunk is None:
            return {"type": "http.disconnect"}
        self.pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def _send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.response += message.get("body", b"")

    def run(self) -> Upload:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": f"{API}/agents", "raw_path": f"{API}/agents".encode(),
            "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
            "headers": [(k.lower().encode(), v.encode()) for k, v in self.headers.items()],
        }
        asyncio.run(self.app(scope, self._receive, self._send))
        return self

    @property
    def detail(self) -> str:
        return json.loads(self.response)["detail"]


def multipart_stream(field: str, filler: bytes, total: int) -> Iterator[bytes]:
    """A multipart body whose ``field`` part keeps coming, ``total`` bytes in all."""
    head = (
        f"--xyz\r\nContent-Disposition: form-data; name=\"env\"\r\n\r\n{ENV}\r\n"
        f"--xyz\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"f\"\r\n\r\n"
    ).encode()
    yield head
    sent = len(head)
    while sent < total:
        yield filler * (CHUNK // len(filler))
        sent += CHUNK


def headers(token: str | None, **extra: str) -> dict[str, str]:
    out = {"host": "testserver", "content-type": "multipart/form-data; boundary=xyz", **extra}
    if token is not None:
        out["authorization"] = f"Bearer {token}"
    return out


def test_declared_oversized_upload_is_refused_before_reading(client, services):
    token = new_user(client, "ada")
    app = create_app(services)
    call = Upload(app, headers(token, **{"content-length": str(HUGE)}),
                  multipart_stream("weights", b"\0", HUGE)).run()
    assert call.status == 413 and "over the limit" in call.detail
    assert call.pulled == 0


def test_streamed_oversized_weights_stop_at_the_limit(client, services):
    token = new_user(client, "ada")
    call = Upload(create_app(services), headers(token), multipart_stream("weights", b"\0", HUGE)).run()
    assert call.status == 413
    assert f"'weights' is over its limit of {UPLOAD_LIMIT:,} bytes" in call.detail
    assert call.pulled <= UPLOAD_LIMIT + 2 * CHUNK  # the limit, plus the chunk in flight


def test_streamed_oversized_spec_stops_at_its_limit(client, services):
    token = new_user(client, "ada")
    call = Upload(create_app(services), headers(token), multipart_stream("spec", b" ", HUGE)).run()
    assert call.status == 413 and "'spec' is over its limit of 65,536 bytes" in call.detail
    assert call.pulled <= 65_536 + 2 * CHUNK


def test_missing_token_is_refused_before_the_body_is_read(services):
    call = Upload(create_app(services), headers(None), multipart_stream("weights", b"\0", HUGE)).run()
    assert call.status == 401 and call.pulled == 0
