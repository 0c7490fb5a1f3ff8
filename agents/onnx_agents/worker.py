"""An ONNX worker process: the only place where Arena loads and runs a user's graph.

Started by :class:`agents.onnx_agents.process.WorkerProcess` as
``python -m agents.onnx_agents.worker REQUEST_FD REPLY_FD CONFIG_JSON``. Before it reads
anything from its parent it confines itself (:func:`confine_worker`): a new network
namespace while it still has one thread, then the imports of numpy, onnx and
onnxruntime (:mod:`agents.onnx_agents.handlers`), then rlimits, ``nobody`` instead of
root, landlock and the seccomp filter (:mod:`agents.onnx_agents.confine`). It says hello
with what the confinement did. Under ``required`` (the config's ``confinement``) a
worker missing a required layer says why in its hello (``refused``) and exits: it never
reads a model. Otherwise it answers one request at a time
(:mod:`agents.onnx_agents.wire` frames) until its request pipe closes. Whatever kills
the process (a native crash, the CPU or address-space limit, the parent's SIGKILL at the
deadline, a refused syscall) costs that request only: the parent starts a replacement.
"""

from __future__ import annotations

import importlib
import json
import mmap
import os
import sys
from typing import Any

from agents.onnx_agents.confine import Layer, confine, enter_network_namespace, refusal
from agents.onnx_agents.wire import WireError, read_frame, write_frame

REFUSED_EXIT = 3
"""A worker's exit status when it refused to run models (a required layer is missing)."""


def confine_worker(config: dict[str, Any]) -> tuple[dict[str, Layer], mmap.mmap | None]:
    """Everything a worker does before its first request: ``(what the confinement did,
    the region shared with the parent)``."""
    shared = None
    if config.get("shared_fd") is not None:  # mapped before confinement: no file opens after
        shared = mmap.mmap(int(config["shared_fd"]), int(config["shared_bytes"]))
        os.close(int(config["shared_fd"]))
    network = enter_network_namespace()  # one thread yet: onnxruntime starts one on import
    importlib.import_module("agents.onnx_agents.handlers")
    gpu = bool(config.get("gpu", False))
    return confine(config.get("memory_bytes"), gpu=gpu, network=network), shared


def hello(config: dict[str, Any], report: dict[str, Layer]) -> dict[str, Any]:
    """The first frame a worker sends: its pid, onnxruntime, and what the confinement did."""
    from agents.onnx_agents.handlers import ONNXRUNTIME_VERSION, available_providers

    mode = str(config.get("confinement", "required"))
    return {"op": "hello", "pid": os.getpid(), "onnxruntime": ONNXRUNTIME_VERSION,
            "providers": available_providers(), "mode": mode, "confinement": report,
            "refused": refusal(report, mode)}


def main(argv: list[str]) -> int:
    """Confine this process, say hello, then serve requests until the pipe closes."""
    requests, replies = int(argv[1]), int(argv[2])
    config = json.loads(argv[3])
    report, shared = confine_worker(config)
    greeting = hello(config, report)
    write_frame(replies, greeting)
    if greeting["refused"]:
        return REFUSED_EXIT
    from agents.onnx_agents.handlers import Worker

    worker = Worker(int(config.get("max_sessions", 16)), shared)
    while True:
        try:
            header, payload = read_frame(requests)
        except WireError:  # the parent closed the pipe (or died): nothing left to do
            os._exit(0)  # no interpreter teardown: onnxruntime's would run under the filter
        reply, data = worker.handle(header, payload)
        write_frame(replies, reply, data)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
