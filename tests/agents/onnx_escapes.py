"""Escapes tried from inside a confined ONNX worker process: a test-only program, never the API's.

``python -m tests.agents.onnx_escapes stand-in PROFILE...`` is a stand-in for the service:
it starts a child confined like a worker (same environment, own session, the worker's
own :func:`agents.onnx_agents.worker.confine_worker`) that first runs an honest model
with onnxruntime, then tries to get out: sockets, files, signals, limits, ptrace, pidfds
and the memory of its parent (the stand-in), new processes, programs and namespaces.
The stand-in prints, as its last line, JSON of what each attempt got (an errno name,
``"ALLOWED"``, or how the child died) and whether it itself came through with its
rlimits unchanged. A child killed mid-list is replaced for the attempts left.

Profiles: ``cpu`` and ``gpu`` are the real workers' confinements (the allow-list; the
CUDA worker's deny-list, no landlock); ``seccomp-allow`` and ``seccomp-deny`` apply
the filter alone in a child that stays root, with every capability: the case of a
service that does not run as root, where the filter is all that stands between a model
and its parent (and as root, only the filter can refuse these calls).

``python -m tests.agents.onnx_escapes refusal`` provokes a kernel refusal for real: the
stand-in puts itself under a filter that refuses ``unshare`` (inherited by its
children, as a container runtime's would be), then asks its sandboxes to validate an
honest model under ``required`` and under ``best-effort``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import resource
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading

ATTEMPTS = (
    "socket_inet", "socket_unix", "socketpair", "open_read", "open_write", "kill_parent",
    "tkill_parent", "tgkill_parent", "pidfd_open_parent", "pidfd_getfd", "pidfd_send_signal",
    "prlimit_parent", "prlimit_parent_read", "ptrace_attach", "ptrace_traceme",
    "process_vm_readv", "sched_setaffinity_parent", "fork", "posix_spawn", "execve",
    "unshare_user", "unshare_net", "clone_newuser", "clone3", "setns", "mount", "bpf",
    "perf_event_open", "keyctl", "io_uring_setup", "ioctl_tiocsti", "socket_in_a_thread",
)
FILE_ATTEMPTS = ("open_read", "open_write")
"""Not tried in a CUDA worker: it opens files by design (its driver loads libraries)."""
CONTROLS = ("socket_inet", "socketpair", "open_read", "prlimit_parent_read", "pidfd_open_parent",
            "fork", "unshare_net", "clone3", "socket_in_a_thread")
"""Harmless to the stand-in, tried by an unconfined child (profile ``none``): they work, so the
refusals above are the confinement's doing."""
X86 = platform.machine() == "x86_64"
NR = {  # x86_64, aarch64
    "tkill": (200, 130), "tgkill": (234, 131), "pidfd_open": (434, 434), "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "clone": (56, 220), "clone3": (435, 435), "setns": (308, 268), "bpf": (321, 280),
    "perf_event_open": (298, 241), "keyctl": (250, 219), "io_uring_setup": (425, 425),
    "unshare": (272, 97),
}
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def _syscall(name: str, *args: int) -> int:
    result = LIBC.syscall(NR[name][0 if X86 else 1], *[ctypes.c_long(a) for a in args])
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _pidfd(ppid: int) -> int:
    try:
        return _syscall("pidfd_open", ppid, 0)
    except OSError:
        return 0  # an fd that is not a pidfd: the kernel alone would say EBADF/EINVAL


def _fork_like(start) -> None:
    pid = start()
    if pid == 0:
        os._exit(0)  # a child: it must not run on
    os.waitpid(pid, 0)


def attempt(name: str, ppid: int) -> None:
    """Try ``name`` against ``ppid``; returns if it worked, raises OSError if refused."""
    if name == "socket_inet":
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    elif name == "socket_unix":
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    elif name == "socketpair":
        for s in socket.socketpair():
            s.close()
    elif name == "open_read":
        with open("/etc/passwd", "rb") as f:
            f.read(1)
    elif name == "open_write":
        os.close(os.open(f"/tmp/onnx-escape-{os.getpid()}", os.O_WRONLY | os.O_CREAT, 0o600))
    elif name == "kill_parent":
        os.kill(ppid, signal.SIGKILL)
    elif name == "tkill_parent":
        _syscall("tkill", ppid, signal.SIGKILL)
    elif name == "tgkill_parent":
        _syscall("tgkill", ppid, ppid, signal.SIGKILL)
    elif name == "pidfd_open_parent":
        os.close(_syscall("pidfd_open", ppid, 0))
    elif name == "pidfd_getfd":  # the parent's fd 0, copied into this process
        os.close(_syscall("pidfd_getfd", _pidfd(ppid), 0, 0))
    elif name == "pidfd_send_signal":
        _syscall("pidfd_send_signal", _pidfd(ppid), signal.SIGKILL, 0, 0)
    elif name == "prlimit_parent":
        resource.prlimit(ppid, resource.RLIMIT_NOFILE, (3, 3))
    elif name == "prlimit_parent_read":
        resource.prlimit(ppid, resource.RLIMIT_NOFILE)
    elif name == "ptrace_attach":
        _syscall("ptrace", 16, ppid, 0, 0)  # PTRACE_ATTACH
        _syscall("ptrace", 17, ppid, 0, 0)  # PTRACE_DETACH: it must not stay stopped
    elif name == "ptrace_traceme":
        _syscall("ptrace", 0, 0, 0, 0)
    elif name == "process_vm_readv":
        buf = ctypes.create_string_buffer(8)
        local = struct.pack("QQ", ctypes.addressof(buf), 8)
        remote = struct.pack("QQ", 0x400000, 8)
        _syscall("process_vm_readv", ppid, ctypes.addressof(ctypes.create_string_buffer(local, 16)), 1,
                 ctypes.addressof(ctypes.create_string_buffer(remote, 16)), 1, 0)
    elif name == "sched_setaffinity_parent":
        os.sched_setaffinity(ppid, os.sched_getaffinity(0))
    elif name == "fork":
        _fork_like(os.fork)
    elif name == "posix_spawn":  # CLONE_VM | CLONE_VFORK: a vfork
        os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)
    elif name == "execve":
        os.execv("/bin/sh", ["sh", "-c", "exit 0"])
    elif name in ("unshare_user", "unshare_net"):
        _syscall("unshare", 0x10000000 if name == "unshare_user" else 0x40000000)
    elif name == "clone_newuser":  # a fork into a new user namespace
        _fork_like(lambda: _syscall("clone", 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0))
    elif name == "clone3":
        args = ctypes.create_string_buffer(struct.pack("11Q", 0x10000000, 0, 0, 0, signal.SIGCHLD,
                                                       0, 0, 0, 0, 0, 0), 88)
        _fork_like(lambda: _syscall("clone3", ctypes.addressof(args), 88))
    elif name == "setns":
        _syscall("setns", _pidfd(ppid), 0x40000000)
    elif name == "mount":  # a bind of nothing: the kernel alone would say ENOENT
        if LIBC.mount(b"/nonexistent-source", b"/nonexistent-target", None, 4096, None) != 0:
            raise OSError(ctypes.get_errno(), "mount")
    elif name == "bpf":
        _syscall("bpf", 0, 0, 0)  # BPF_MAP_CREATE with no attributes
    elif name == "perf_event_open":
        _syscall("perf_event_open", ctypes.addressof(ctypes.create_string_buffer(128)), ppid, -1, -1, 0)
    elif name == "keyctl":
        _syscall("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
    elif name == "io_uring_setup":
        os.close(_syscall("io_uring_setup", 1, ctypes.addressof(ctypes.create_string_buffer(120))))
    elif name == "ioctl_tiocsti":  # typing into a terminal
        fcntl.ioctl(2, termios.TIOCSTI, b"x")
    elif name == "socket_in_a_thread":  # the filter is on every thread; threads still start
        failure: list[OSError] = []

        def run() -> None:
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
            except OSError as exc:
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        if failure:
            raise failure[0]
    else:
        raise ValueError(name)


def child(spec: dict) -> None:
    """Confine this process as ``spec["profile"]`` says, run a model, then every attempt."""
    from agents.onnx_agents.confine import _libc, _seccomp
    from agents.onnx_agents.worker import confine_worker

    model = bytes.fromhex(spec["model"])
    profile, config = spec["profile"], spec["config"]
    if profile in ("cpu", "gpu"):
        report, _ = confine_worker(config)
        from agents.onnx_agents.handlers import Worker

        worker = Worker(2)
        worker.handle({"op": "load", "key": "m", "device": "cpu", "threads": 1, "input": "obs",
                       "output": "logits", "limit_s": 10.0}, bytearray(model))
        import numpy as np

        reply, out = worker.handle({"op": "run", "key": "m", "limit_s": 10.0, "dtype": "float32",
                                    "shape": [4, 3, 3, 2]}, bytearray(np.zeros((4, 3, 3, 2), np.float32)))
        ran = list(np.asarray(out).shape) if reply.get("ok") else reply
    elif profile == "none":
        report, ran = {}, None
    else:
        libc = _libc()
        libc.prctl(38, 1, 0, 0, 0)  # no_new_privs
        report = {"seccomp": _seccomp(libc, allow_list=profile == "seccomp-allow")}
        ran = None
    print(json.dumps({"report": report, "ran": ran, "uid": os.getuid()}), flush=True)
    for name in spec["attempts"]:
        try:
            attempt(name, spec["ppid"])
            result = "ALLOWED"
        except OSError as exc:
            result = errno.errorcode.get(exc.errno or 0, str(exc))
        print(json.dumps({name: result}), flush=True)


def _limits() -> dict[str, list[int]]:
    return {name: list(resource.getrlimit(getattr(resource, name)))
            for name in dir(resource) if name.startswith("RLIMIT_")}


def stand_in(profile: str) -> dict:
    """Run every attempt in children of this process; what they got, and how it fared."""
    from agents.onnx_agents.process import worker_environment
    from tests.agents.onnx_corpus import honest_model

    before = _limits()
    gpu = profile == "gpu"
    config = {"memory_bytes": None if gpu else 4 << 30, "gpu": gpu, "max_sessions": 2,
              "shared_fd": None, "confinement": "required"}
    if profile == "none":
        left = list(CONTROLS)
    else:
        left = [a for a in ATTEMPTS if not (profile in ("gpu", "seccomp-deny") and a in FILE_ATTEMPTS)]
    results: dict[str, str] = {}
    reports: list[dict] = []
    while left:
        spec = {"profile": profile, "config": config, "attempts": left, "ppid": os.getpid(),
                "model": honest_model(seed=3).hex()}
        done = subprocess.run([sys.executable, "-s", "-m", "tests.agents.onnx_escapes", "child", json.dumps(spec)],
                              env=worker_environment(), cwd="/", start_new_session=True, check=False,
                              capture_output=True, text=True, timeout=120)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"the child did not start: {done.stderr[-2000:]}")
        reports.append(lines[0])
        for line in lines[1:]:
            results.update(line)
        left = [name for name in left if name not in results]
        if left:  # it died (or was replaced by a program) in the first one left
            code = done.returncode
            results[left.pop(0)] = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
    return {"results": results, "child": reports[0], "parent_alive": True, "pid": os.getpid(),
            "limits_unchanged": _limits() == before}


def _refuse_unshare() -> None:
    """Put this process (and every child it starts) under a filter that refuses unshare."""
    arch, nr = (0xC000003E, 272) if X86 else (0xC00000B7, 97)
    insns = [(0x20, 0, 0, 4), (0x15, 0, 3, arch), (0x20, 0, 0, 0), (0x15, 0, 1, nr),
             (0x06, 0, 0, 0x00050000 | errno.EPERM), (0x06, 0, 0, 0x7FFF0000)]
    program = b"".join(struct.pack("<HBBI", *i) for i in insns)
    buf = ctypes.create_string_buffer(program, len(program))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(insns), ctypes.addressof(buf))
    if LIBC.prctl(38, 1, 0, 0, 0) != 0 or LIBC.syscall(317 if X86 else 277, 1, 0, ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def refusal() -> dict:
    """Validate an honest model under ``required`` and ``best-effort`` where unshare is refused."""
    from agents.onnx_agents.policy import validate_onnx_bytes
    from agents.onnx_agents.process import ConfinementRefused, SandboxLimits
    from agents.onnx_agents.sandbox import OnnxSandbox
    from tests.agents.onnx_corpus import honest_model, spec_json

    _refuse_unshare()
    out: dict = {}
    for mode in ("required", "best-effort"):
        box = OnnxSandbox(SandboxLimits(workers=1, confinement=mode))
        try:
            model = validate_onnx_bytes(honest_model(seed=4), spec_json(), sandbox=box)
            out[mode] = {"validated": model.sha256, "confinement": box.confinement()}
        except ConfinementRefused as exc:
            again = None
            try:  # a second call: refused at once, no worker started
                validate_onnx_bytes(honest_model(seed=4), spec_json(), sandbox=box)
            except ConfinementRefused as second:
                again = str(second)
            out[mode] = {"refused": str(exc), "again": again, "workers_after": box.pids()}
        finally:
            box.close()
    return out


def refusal_api(db_url: str, redis_url: str, data_dir: str) -> dict:
    """An ONNX upload to a real API (TestClient) whose process's workers are refused a layer."""
    from fastapi.testclient import TestClient

    from arena.api import create_app
    from arena.core.settings import Settings
    from arena.storage.wiring import open_services
    from tests.agents.onnx_corpus import honest_model, spec_json
    from tests.api.helpers import API, RAISED_LIMITS, new_user, stored_state
    from tests.api.test_onnx_uploads import send

    _refuse_unshare()
    settings = Settings(page_cache_s=0.0, data_dir=data_dir, database_url=db_url, redis_url=redis_url,
                        max_upload_bytes=1 << 20, onnx_confinement="required", **RAISED_LIMITS)
    with open_services(settings) as services, TestClient(create_app(services)) as client:
        token = new_user(client, "ada")
        before = stored_state(services)
        first = send(client, token, honest_model(seed=11), spec_json())
        second = send(client, token, honest_model(seed=12), spec_json())
        health = client.get(f"{API}/health")
        out = {"first": [first.status_code, first.json()], "second": [second.status_code, second.json()],
               "stored_before": before, "stored_after": stored_state(services),
               "health": [health.status_code, health.json()]}
        services.sessions.dispose()
    return out


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(json.loads(sys.argv[2]))
    elif sys.argv[1] == "stand-in":
        print(json.dumps({profile: stand_in(profile) for profile in sys.argv[2:]}))
    elif sys.argv[1] == "refusal":
        print(json.dumps(refusal()))
    elif sys.argv[1] == "refusal-api":
        print(json.dumps(refusal_api(*sys.argv[2:5]), default=str))
