"""Frames between Arena and its ONNX worker processes: a JSON header and raw bytes.

One frame is ``u32 header length | u64 payload length | header | payload``. The header
is a small JSON object (what to do, a numpy array's ``dtype`` and ``shape``); the
payload is model bytes or an array's raw C-order buffer, written and read without a
copy into or out of numpy. A large batch travels instead through a memory region the
two processes share (:func:`put_shared`, :func:`shared_array`), so that whatever its
size a call costs one wake-up each way: through a pipe a batch larger than its buffer
would cost a wake-up per buffer. No pickle on either side: a compromised worker can send
bad numbers, never objects, and the parent checks every header it reads.

The worker uses the blocking :func:`write_frame` and :func:`read_frame`. The parent's
fds are non-blocking and every read and write has a deadline
(:func:`send_frame`, :func:`recv_frame`), so a hung worker never holds the caller
past it.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import Any

import numpy as np

_PREFIX = struct.Struct("<IQ")
MAX_HEADER_BYTES = 1 << 16
MAX_PAYLOAD_BYTES = 1 << 31
SHARED_MIN_BYTES = 1 << 16
"""Arrays from this size on go through the shared region rather than the pipe."""
ARRAY_DTYPES = frozenset({"float32", "float64", "float16", "int64", "int32", "int16", "int8",
                          "uint8", "bool"})


class WireError(Exception):
    """The other end closed its pipe, sent a malformed frame, or missed the deadline."""


class Deadline(WireError):
    """The frame was not sent or received before the deadline."""


def encode(header: dict[str, Any], payload: bytes | memoryview | np.ndarray = b"") -> list:
    """The buffers of one frame (an array payload is passed without a copy)."""
    if isinstance(payload, np.ndarray):
        array = np.ascontiguousarray(payload)
        header = {**header, "dtype": array.dtype.name, "shape": list(array.shape)}
        payload = memoryview(array).cast("B") if array.size else b""
    raw = json.dumps(header, separators=(",", ":")).encode()
    return [_PREFIX.pack(len(raw), len(payload)) + raw, payload]


def array_bytes(header: dict[str, Any]) -> int:
    """Bytes of the array a header declares (its ``dtype`` and ``shape``), checked.

    Raises:
        WireError: An unknown dtype or a bad shape.
    """
    dtype, shape = header.get("dtype"), header.get("shape")
    if dtype not in ARRAY_DTYPES or not isinstance(shape, list) or not all(
            isinstance(d, int) and 0 <= d < 2**31 for d in shape) or len(shape) > 8:
        raise WireError(f"malformed array header {str(header)[:200]}")
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def array_of(header: dict[str, Any], payload: bytearray | memoryview) -> np.ndarray:
    """The array a frame carries, checked against its header.

    Raises:
        WireError: An unknown dtype, a bad shape, or a payload of the wrong size.
    """
    if array_bytes(header) != len(payload):
        raise WireError(f"array payload of {len(payload)} bytes does not match {str(header)[:200]}")
    return np.frombuffer(payload, dtype=header["dtype"]).reshape(header["shape"])


# -- batches in shared memory: the frame carries only the header --------------------------


def put_shared(buffer: Any, array: np.ndarray) -> dict[str, Any] | None:
    """Copy ``array`` to the start of a shared ``buffer``; its header, or ``None`` if too big."""
    array = np.ascontiguousarray(array)
    if array.nbytes > len(buffer):
        return None
    np.frombuffer(buffer, dtype=np.uint8, count=array.nbytes)[:] = array.reshape(-1).view(np.uint8)
    return {"dtype": array.dtype.name, "shape": list(array.shape)}


def shared_array(header: Any, buffer: Any) -> np.ndarray:
    """A view of the array ``header`` declares at the start of a shared ``buffer`` (copy it
    before the buffer is written again).

    Raises:
        WireError: A malformed header, or an array larger than the buffer.
    """
    if not isinstance(header, dict):
        raise WireError("malformed shared array header")
    size = array_bytes(header)
    if size > len(buffer):
        raise WireError(f"a shared array of {size} bytes in a buffer of {len(buffer)}")
    return np.frombuffer(buffer, dtype=header["dtype"], count=size // np.dtype(header["dtype"]).itemsize
                         ).reshape(header["shape"])


def _header(raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except ValueError:
        raise WireError("malformed frame header") from None
    if not isinstance(header, dict):
        raise WireError("frame header is not an object")
    return header


def _lengths(prefix: bytes) -> tuple[int, int]:
    size, payload = _PREFIX.unpack(prefix)
    if size > MAX_HEADER_BYTES or payload > MAX_PAYLOAD_BYTES:
        raise WireError(f"frame of {size} + {payload} bytes is over the limits")
    return size, payload


# -- the worker's side: blocking ----------------------------------------------------------


def write_frame(fd: int, header: dict[str, Any], payload: Any = b"") -> None:
    """Write one frame to a blocking fd."""
    for buf in encode(header, payload):
        view = memoryview(buf)
        while view:
            view = view[os.write(fd, view):]


def _read_exact(fd: int, size: int) -> bytearray:
    buf = bytearray(size)
    view, done = memoryview(buf), 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if got == 0:
            raise WireError("pipe closed")
        done += got
    return buf


def read_frame(fd: int) -> tuple[dict[str, Any], bytearray]:
    """Read one frame from a blocking fd.

    Raises:
        WireError: End of file, or a malformed frame.
    """
    size, payload = _lengths(bytes(_read_exact(fd, _PREFIX.size)))
    return _header(bytes(_read_exact(fd, size))), _read_exact(fd, payload)


# -- the parent's side: non-blocking, with a deadline -----------------------------------


def _wait(fd: int, deadline: float, *, write: bool) -> None:
    # poll, not select: select refuses descriptors from 1024 on (FD_SETSIZE), which an API
    # process holding a few hundred sockets reaches. A hang-up or error counts as ready:
    # the read or write that follows says what happened.
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Deadline("deadline passed")
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    if not poller.poll(math.ceil(remaining * 1000)):
        raise Deadline("deadline passed")


def send_frame(fd: int, deadline: float, header: dict[str, Any], payload: Any = b"") -> None:
    """Write one frame to a non-blocking fd before ``deadline`` (``time.monotonic``).

    Raises:
        Deadline: The reader did not take it in time.
        WireError: The reader is gone.
    """
    for buf in encode(header, payload):
        view = memoryview(buf)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                _wait(fd, deadline, write=True)
            except (BrokenPipeError, OSError) as exc:
                raise WireError(f"pipe closed ({exc})") from None


def _recv_exact(fd: int, size: int, deadline: float, into: memoryview | None = None) -> memoryview:
    view = into if into is not None else memoryview(bytearray(size))
    done = 0
    while done < size:
        try:
            got = os.readv(fd, [view[done:]])
        except BlockingIOError:
            _wait(fd, deadline, write=False)
            continue
        if got == 0:
            raise WireError("pipe closed")
        done += got
    return view


def recv_frame(fd: int, deadline: float, max_payload: int = MAX_PAYLOAD_BYTES
               ) -> tuple[dict[str, Any], memoryview]:
    """Read one frame of at most ``max_payload`` payload bytes from a non-blocking fd
    before ``deadline``.

    Raises:
        Deadline: Nothing complete arrived in time.
        WireError: End of file (the writer died), or a malformed or oversized frame.
    """
    size, payload = _lengths(bytes(_recv_exact(fd, _PREFIX.size, deadline)))
    if payload > max_payload:
        raise WireError(f"a payload of {payload} bytes where at most {max_payload} were expected")
    header = _header(bytes(_recv_exact(fd, size, deadline)))
    return header, _recv_exact(fd, payload, deadline)
