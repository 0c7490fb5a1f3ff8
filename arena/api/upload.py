"""Reading a multipart upload with hard size limits, straight off the request stream.

FastAPI's ``UploadFile`` lets the form parser spool the whole body (to memory, then a
temporary file) before the handler runs, so an oversized upload is only refused after
it was received and stored. Here the limit is enforced while reading:

* a ``Content-Length`` over the total limit is refused before one body byte is read;
* each field has its own cap, checked before a chunk is kept, so no field ever holds
  more than its limit in memory, and reading stops at the first byte over it;
* the body as a whole is capped too (chunked uploads carry no ``Content-Length``).

Nothing is written to disk. The fields come back as bytes for the caller to validate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from arena.core.errors import PayloadTooLarge
from envs.errors import InvalidSubmission

log = logging.getLogger(__name__)

# Room for boundaries and part headers on top of the fields' own limits.
ENVELOPE_BYTES = 16 * 1024
MAX_PART_HEADERS = 8
MAX_PART_HEADER_BYTES = 1024


@dataclass
class _Part:
    name: str = ""
    data: bytearray = field(default_factory=bytearray)
    disposition: bytes = b""
    header_name: bytes = b""
    header_value: bytes = b""


class _FormCollector:
    """python-multipart callbacks that keep each known field, within its limit."""

    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = limits
        self.fields: dict[str, bytes] = {}
        self.part = _Part()

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.part.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.part.header_value += data[start:end]

    def on_header_end(self) -> None:
        if self.part.header_name.strip().lower() == b"content-disposition":
            self.part.disposition = self.part.header_value
        self.part.header_name = self.part.header_value = b""

    def on_headers_finished(self) -> None:
        kind, options = parse_options_header(self.part.disposition)
        name = options.get(b"name", b"").decode("utf-8", "replace")
        if kind != b"form-data" or not name:
            raise InvalidSubmission("every part needs 'Content-Disposition: form-data; name=...'")
        if name not in self.limits:
            raise InvalidSubmission(
                f"unexpected form field {name[:64]!r}; send only {', '.join(self.limits)}"
            )
        if name in self.fields:
            raise InvalidSubmission(f"form field {name!r} was sent twice")
        self.part.name = name

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        limit = self.limits[self.part.name]
        if len(self.part.data) + (end - start) > limit:
            raise PayloadTooLarge(
                f"form field {self.part.name!r} is over its limit of {limit:,} bytes"
            )
        self.part.data += data[start:end]

    def on_part_end(self) -> None:
        if self.part.name:
            self.fields[self.part.name] = bytes(self.part.data)

    def callbacks(self) -> dict:
        return {name: getattr(self, name) for name in (
            "on_part_begin", "on_header_field", "on_header_value", "on_header_end",
            "on_headers_finished", "on_part_data", "on_part_end",
        )}


def _boundary(request: Request, field_names: str) -> bytes:
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary", b"")
    if kind != b"multipart/form-data" or not boundary:
        raise InvalidSubmission(
            f"send the upload as multipart/form-data with fields {field_names}"
        )
    return boundary


def _declared_length(request: Request, max_total: int) -> None:
    declared = request.headers.get("content-length")
    if declared is None:
        return
    try:
        length = int(declared)
    except ValueError:
        raise InvalidSubmission(f"bad Content-Length header {declared[:32]!r}") from None
    if length > max_total:
        raise PayloadTooLarge(
            f"the upload is {length:,} bytes, over the limit of {max_total:,} bytes"
        )


async def read_form(request: Request, limits: Mapping[str, int]) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` request body, each within its limit.

    Args:
        request: The request; its body has not been read yet.
        limits: Byte limit of every accepted field name.

    Returns:
        ``{field name: bytes}`` of the fields sent (missing fields are absent).

    Raises:
        PayloadTooLarge: The declared length, a field or the whole body is over its
            limit (reading stops there).
        InvalidSubmission: Not multipart, malformed, or an unexpected/repeated field.
    """
    names = ", ".join(limits)
    max_total = sum(limits.values()) + ENVELOPE_BYTES
    boundary = _boundary(request, names)
    _declared_length(request, max_total)
    collector = _FormCollector(limits)
    try:
        parser = MultipartParser(
            boundary, collector.callbacks(),
            max_header_count=MAX_PART_HEADERS, max_header_size=MAX_PART_HEADER_BYTES,
        )
    except (FormParserError, ValueError) as exc:
        raise InvalidSubmission(f"bad multipart boundary: {exc}") from None
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_total:
                raise PayloadTooLarge(f"the upload is over the limit of {max_total:,} bytes")
            parser.write(chunk)
        parser.finalize()
    except FormParserError as exc:
        raise InvalidSubmission(f"malformed multipart body ({exc}); fields: {names}") from None
    except ClientDisconnect:
        raise InvalidSubmission("the upload was interrupted before it was complete") from None
    log.debug("read %d upload bytes: fields %s", received, sorted(collector.fields))
    return collector.fields
