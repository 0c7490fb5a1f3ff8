"""Logging for the service: plain text for people, one JSON object per line for machines.

Call sites attach ids as ``extra`` fields — ``log.info("...", extra={"match_id": ...,
"agent_id": ...})`` — and both formats carry them: the JSON formatter as keys of the
object, the text formatter as ``key=value`` after the message. ``ARENA_LOG_FORMAT=json``
(the compose deployment sets it) makes every line parseable by a log pipeline.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def extras(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra=`` fields of ``record`` (everything a plain LogRecord does not have)."""
    return {k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", **extra, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **extras(record),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = extras(record)
        if not fields:
            return line
        head, sep, tail = line.partition("\n")  # keep a traceback below the fields
        return head + "".join(f" {k}={v}" for k, v in fields.items()) + sep + tail


def configure_logging(fmt: str = "text", level: str | int = "INFO") -> None:
    """Route every log record to stderr in ``fmt`` (``text`` or ``json``) from ``level`` up."""
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', not {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
