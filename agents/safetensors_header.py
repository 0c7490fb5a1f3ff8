"""Our own strict reader of the safetensors header, run before the library sees the bytes.

Layout of a safetensors file: 8-byte little-endian header length ``n``, ``n`` bytes of
JSON header, then the tensor data buffer. The header maps tensor names to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the data
buffer) plus an optional ``"__metadata__"`` map of strings.

Why parse it ourselves when the library checks too: defence in depth at the upload
boundary, and messages a submitter can act on. We are stricter than the library on
purpose: the data buffer must be covered exactly (no overlaps, no gaps, no trailing
bytes), so a file cannot double as another format (a polyglot) or hide a payload;
duplicate JSON keys are rejected so no two parsers can read different headers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from envs.errors import InvalidSubmission

DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
"""dtypes a checkpoint may declare, with their item size in bytes."""
DTYPE_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
"""The same dtypes by the names numpy and torch give them (what an error message says)."""
MAX_HEADER_BYTES = 1 << 20
MAX_TENSORS = 1024
MAX_NDIM = 8
_NOT_SAFETENSORS = "not a safetensors file"
_EXPORT_HINT = "export the state dict with safetensors.torch.save_file(model.state_dict(), path)"


@dataclass(frozen=True)
class TensorEntry:
    """One tensor declared in the header; ``begin``/``end`` index the data buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text: str) -> Any:
    """``json.loads`` that rejects duplicate keys and NaN/Infinity constants."""
    return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)


def _sniff(data: bytes) -> str:
    """A hint naming what the bytes look like instead, for the error message."""
    if data[:4] == b"PK\x03\x04":
        return "; it looks like a zip archive (torch.save output?)"
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "; it looks like a Python pickle, which the arena never loads"
    # An ONNX ModelProto starts with ir_version (field 1) then another of its fields.
    if len(data) > 3 and data[:1] == b"\x08" and data[2:3] in b"\x12\x1a\x22\x28\x32\x3a\x42":
        return '; it looks like an ONNX model: its spec needs "arch": "onnx"'
    return ""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(name: Any, info: Any, data_len: int) -> TensorEntry:
    if not isinstance(name, str) or not name or len(name) > 256:
        raise InvalidSubmission(f"malformed safetensors header: bad tensor name {name!r}")
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise InvalidSubmission(
            f"malformed safetensors header: tensor {name!r} must have exactly dtype, shape, data_offsets"
        )
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in DTYPE_SIZES:
        raise InvalidSubmission(
            f"tensor {name!r} has dtype {dtype!r}; allowed: {', '.join(DTYPE_SIZES)} "
            "(checkpoints hold float32 weights)"
        )
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_NDIM
        or not all(_int(d) and d >= 0 for d in shape)
    ):
        raise InvalidSubmission(
            f"malformed safetensors header: tensor {name!r} shape {shape!r} must be a list of "
            f"at most {MAX_NDIM} non-negative integers"
        )
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_int(o) for o in offsets)):
        raise InvalidSubmission(
            f"malformed safetensors header: tensor {name!r} data_offsets must be [begin, end]"
        )
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise InvalidSubmission(
            f"malformed safetensors file: tensor {name!r} data_offsets {offsets} fall outside "
            f"the {data_len}-byte data buffer"
        )
    if end - begin != math.prod(shape) * DTYPE_SIZES[dtype]:
        raise InvalidSubmission(
            f"malformed safetensors file: tensor {name!r} spans {end - begin} bytes but shape "
            f"{shape} of {dtype} needs {math.prod(shape) * DTYPE_SIZES[dtype]}"
        )
    return TensorEntry(name, dtype, tuple(shape), begin, end)


def _check_layout(entries: list[TensorEntry], data_len: int) -> None:
    """Tensors must tile the data buffer exactly: no overlap, no gap, nothing after."""
    position = 0
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin < position:
            raise InvalidSubmission(
                f"malformed safetensors file: tensor {e.name!r} overlaps the previous tensor "
                f"(starts at byte {e.begin}, previous ends at {position})"
            )
        if e.begin > position:
            raise InvalidSubmission(
                f"malformed safetensors file: {e.begin - position} unused bytes before tensor "
                f"{e.name!r}; {_EXPORT_HINT}"
            )
        position = e.end
    if position != data_len:
        raise InvalidSubmission(
            f"malformed safetensors file: {data_len - position} trailing bytes after the last "
            f"tensor; the file must end where the tensor data ends; {_EXPORT_HINT}"
        )


def _read_header(data: bytes) -> tuple[dict, int]:
    """The parsed header object and the offset where the data buffer starts."""
    if len(data) < 8:
        raise InvalidSubmission(
            f"{_NOT_SAFETENSORS}: only {len(data)} bytes{_sniff(data)}; {_EXPORT_HINT}"
        )
    n = int.from_bytes(data[:8], "little")
    if n < 2 or n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise InvalidSubmission(
            f"{_NOT_SAFETENSORS}: declared header length {n} does not fit the {len(data)}-byte "
            f"file (limit {MAX_HEADER_BYTES}){_sniff(data)}; {_EXPORT_HINT}"
        )
    try:
        header = strict_json(bytes(data[8 : 8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidSubmission(
            f"{_NOT_SAFETENSORS}: header is not valid JSON ({e}){_sniff(data)}; {_EXPORT_HINT}"
        ) from None
    if not isinstance(header, dict):
        raise InvalidSubmission(f"{_NOT_SAFETENSORS}: header is not a JSON object; {_EXPORT_HINT}")
    return header, 8 + n


def parse_header(data: bytes) -> list[TensorEntry]:
    """Validate the structure of safetensors bytes without trusting any library.

    Args:
        data: The whole file.

    Returns:
        The declared tensors, in file order.

    Raises:
        InvalidSubmission: ``not a safetensors file ...`` for other formats (pickle, zip,
            random bytes), ``malformed safetensors ...`` for inconsistent headers.
    """
    header, start = _read_header(data)
    data_len = len(data) - start
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidSubmission(
            "malformed safetensors header: __metadata__ must map strings to strings"
        )
    if len(header) > MAX_TENSORS:
        raise InvalidSubmission(
            f"safetensors file declares {len(header)} tensors, more than {MAX_TENSORS}"
        )
    entries = [_entry(name, info, data_len) for name, info in header.items()]
    _check_layout(entries, data_len)
    return sorted(entries, key=lambda e: e.begin)
