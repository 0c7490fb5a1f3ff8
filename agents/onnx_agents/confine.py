"""Confining an ONNX worker process: rlimits, no network, no files, fewer syscalls.

Called once by :mod:`agents.onnx_agents.worker` after its imports and before it reads
its first model. Each layer is tried on its own and degrades gracefully: what the
kernel refuses is reported (and logged by the parent), never fatal, because the
parent's hard deadline (it SIGKILLs a worker that overruns) and the address-space
limit hold on any Linux. Everything here is stdlib plus ``ctypes`` calls into libc.

* **rlimits**: ``RLIMIT_AS`` (address space; skipped for a CUDA worker, whose driver
  reserves far more virtual memory than it uses), ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``
  small; ``RLIMIT_CPU`` is set per request by the worker (see :func:`limit_cpu`).
* **network**: ``unshare(CLONE_NEWNET)``: the worker gets its own network namespace
  with only a down loopback, so nothing can be reached (needs ``CAP_SYS_ADMIN``).
* **no_new_privs**, then **landlock** (Linux 5.13+): a ruleset that handles every
  file-system right and grants none, so no file can be opened, written or executed
  (ABI 4+: no TCP bind or connect either; ABI 6+: no signals to, or abstract sockets
  of, processes outside the sandbox). Not for a CUDA worker: it loads its libraries
  when the session is created.
* **seccomp** (x86_64, aarch64): a filter that answers ``EPERM`` to the syscalls a
  model never needs and an exploit would (sockets, exec, ptrace, mounts, namespaces,
  bpf, io_uring, keyrings, ...), on every thread (``SECCOMP_FILTER_FLAG_TSYNC``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import resource
import struct

CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
NOFILE = 32  # the worker opens nothing after its imports; its pipes are fds 0-4

# The file-system rights of landlock ABI 1..5 (LANDLOCK_ACCESS_FS_*), net (ABI 4), scopes (ABI 6).
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = 0b11  # BIND_TCP | CONNECT_TCP
_SCOPES = 0b11  # ABSTRACT_UNIX_SOCKET | SIGNAL

# (audit arch, seccomp, landlock create/restrict, denied syscalls by name: number)
_ARCH = {
    "x86_64": (0xC000003E, 317, {
        "socket": 41, "socketpair": 53, "connect": 42, "execve": 59, "execveat": 322,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321,
        "userfaultfd": 323, "io_uring_setup": 425, "perf_event_open": 298, "keyctl": 250,
        "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "unshare": 272, "setns": 308,
    }),
    "aarch64": (0xC00000B7, 277, {
        "socket": 198, "socketpair": 199, "connect": 203, "execve": 221, "execveat": 281,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280,
        "userfaultfd": 282, "io_uring_setup": 425, "perf_event_open": 241, "keyctl": 219,
        "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "unshare": 97, "setns": 268,
    }),
}
_LANDLOCK_CREATE, _LANDLOCK_RESTRICT = 444, 446  # the same on every architecture


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _errno() -> str:
    return os.strerror(ctypes.get_errno())


def set_rlimits(memory_bytes: int | None) -> str:
    """Address space (unless ``None``), no core files, few file descriptors."""
    done = []
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        done.append(f"address space {memory_bytes / 2**30:.1f} GiB")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    done += ["no core files", f"{NOFILE} file descriptors", "CPU time per request"]
    return ", ".join(done)


def limit_cpu(seconds: float) -> None:
    """Let the process use at most ``seconds`` more CPU time (then the kernel kills it).

    ``RLIMIT_CPU`` counts the process's whole life, so a long-lived worker moves its
    soft limit before each request; SIGXCPU at the soft limit ends it (no core file).
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))


def unshare_network(libc: ctypes.CDLL) -> str:
    """Move into a new, empty network namespace."""
    if libc.unshare(CLONE_NEWNET) != 0:
        return f"not isolated (unshare(CLONE_NEWNET) refused: {_errno()})"
    return "own empty network namespace"


def _landlock(libc: ctypes.CDLL) -> str:
    abi = libc.syscall(_LANDLOCK_CREATE, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return f"unavailable ({_errno()})"
    fs = _FS_RIGHTS[max(v for v in _FS_RIGHTS if v <= abi)]
    fields = [fs] + ([_NET_TCP] if abi >= 4 else []) + ([_SCOPES] if abi >= 6 else [])
    packed = struct.pack(f"<{len(fields)}Q", *fields)
    attr = ctypes.create_string_buffer(packed, len(packed))
    ruleset = libc.syscall(_LANDLOCK_CREATE, attr, len(packed), 0)
    if ruleset < 0:
        return f"refused ({_errno()})"
    try:
        if libc.syscall(_LANDLOCK_RESTRICT, ruleset, 0) != 0:
            return f"refused ({_errno()})"
    finally:
        os.close(ruleset)
    what = ["no file access"] + (["no TCP"] if abi >= 4 else []) + (
        ["no signals or abstract sockets outside"] if abi >= 6 else [])
    return f"ABI {abi}: {', '.join(what)}"


def _seccomp_program(arch: int, numbers: list[int], x32: bool) -> bytes:
    """A classic BPF program: ``EPERM`` for ``numbers`` (and a foreign arch), else allow."""
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    n = len(numbers) + (1 if x32 else 0)
    insns = [(ld, 0, 0, 4), (jeq, 0, n + 2, arch), (ld, 0, 0, 0)]
    if x32:  # x32 syscalls carry bit 30: refuse them all rather than list them twice
        insns.append((jge, n, 0, 0x40000000))
    for i, nr in enumerate(numbers):
        insns.append((jeq, len(numbers) - i, 0, nr))
    insns += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return b"".join(struct.pack("<HBBI", *insn) for insn in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(libc: ctypes.CDLL) -> str:
    machine = platform.machine()
    if machine not in _ARCH:
        return f"unavailable on {machine}"
    arch, seccomp_nr, denied = _ARCH[machine]
    program = _seccomp_program(arch, list(denied.values()), x32=machine == "x86_64")
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog): every thread
    if libc.syscall(seccomp_nr, 1, 1, ctypes.byref(fprog)) != 0:
        return f"refused ({_errno()})"
    return f"EPERM for {', '.join(sorted(denied))}"


def confine(memory_bytes: int | None, *, files: bool = True) -> dict[str, str]:
    """Apply every layer this kernel allows; returns what each one did.

    Args:
        memory_bytes: ``RLIMIT_AS``; ``None`` leaves the address space unlimited.
        files: Deny all file access with landlock (``False`` for a CUDA worker).

    Returns:
        ``{"rlimits", "network", "landlock", "seccomp"}``: what applied, or why not.
    """
    libc = _libc()
    report = {"rlimits": set_rlimits(memory_bytes), "network": unshare_network(libc)}
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        report["landlock"] = report["seccomp"] = f"refused (no_new_privs: {_errno()})"
        return report
    report["landlock"] = _landlock(libc) if files else "off (a CUDA worker loads libraries)"
    report["seccomp"] = _seccomp(libc)
    return report
