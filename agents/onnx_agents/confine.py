"""Confining an ONNX worker process: rlimits, no network, not root, no files, few syscalls.

A worker (:mod:`agents.onnx_agents.worker`) enters its network namespace first, while it
still has one thread (a user namespace requires it; onnxruntime starts a thread when
imported), then imports onnxruntime and applies the rest before it reads its first
model. Everything here is stdlib plus ``ctypes`` calls into libc. Each layer reports
``{"active": bool, "detail": str}``:

* **rlimits**: ``RLIMIT_AS`` (address space; not for a CUDA worker, whose driver
  reserves far more virtual memory than it uses), ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``
  small; ``RLIMIT_CPU`` is set per request by the worker (see :func:`limit_cpu`).
* **network**: a new, empty network namespace (``unshare(CLONE_NEWNET)`` with
  ``CAP_SYS_ADMIN``, else inside a new user namespace).
* **user**: a worker started by root drops to ``nobody`` (groups, gids, uids; the
  capabilities go with uid 0, checked by trying to take uid 0 back). A worker of
  another user is already unprivileged.
* **no_new_privs**, then **landlock** (Linux 5.13+): every file-system right handled
  and none granted (ABI 4+: no TCP either; ABI 6+: no signals or abstract sockets
  outside). Applied where the kernel has it, never required: the seccomp allow-list
  already refuses every ``open``. Not for a CUDA worker (it loads libraries).
* **seccomp** (x86_64, aarch64, every thread): :mod:`agents.onnx_agents.seccomp`, an
  allow-list for a CPU worker, a deny-list for a CUDA one.

The operator's mode (:data:`MODE_VARIABLE`, :func:`resolve_mode`) decides what a
refused layer means: under ``required`` (the default where the kernel has seccomp and
network namespaces) a worker missing any of :data:`REQUIRED` runs no model
(:func:`refusal`); under ``best-effort`` it runs with what applied.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import pwd
import resource
import struct
import sys
from pathlib import Path
from typing import Any

from agents.onnx_agents import seccomp

CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
PR_SET_NO_NEW_PRIVS = 38
NOFILE = 32  # the worker opens nothing after its imports; its pipes are fds 0-4

MODES = ("required", "best-effort")
MODE_VARIABLE = "ARENA_ONNX_CONFINEMENT"
"""The environment variable every process that starts workers reads (the service's
setting of the same name, ``arena.core.settings``)."""
REQUIRED = ("rlimits", "network", "user", "seccomp")
"""The layers ``required`` demands (landlock is applied where the kernel has it)."""

# The file-system rights of landlock ABI 1..5 (LANDLOCK_ACCESS_FS_*), net (ABI 4), scopes (ABI 6).
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = 0b11  # BIND_TCP | CONNECT_TCP
_SCOPES = 0b11  # ABSTRACT_UNIX_SOCKET | SIGNAL
_SECCOMP_NR = {"x86_64": 317, "aarch64": 277}
_LANDLOCK_CREATE, _LANDLOCK_RESTRICT = 444, 446  # the same on every architecture
Layer = dict[str, Any]


def layer(active: bool, detail: str) -> Layer:
    return {"active": active, "detail": detail}


def kernel_confines() -> bool:
    """Whether this kernel has seccomp filters (for our architecture) and network namespaces."""
    return (platform.machine() in seccomp.ARCHES and Path("/proc/sys/kernel/seccomp/actions_avail").exists()
            and Path("/proc/self/ns/net").exists())


def resolve_mode(value: str | None = None) -> str:
    """``required`` or ``best-effort``: ``value``, else :data:`MODE_VARIABLE`, else the default
    (``required`` where :func:`kernel_confines`).

    Raises:
        ValueError: Any other value.
    """
    value = (os.environ.get(MODE_VARIABLE, "") if value is None else value).strip().lower()
    if not value:
        return "required" if kernel_confines() else "best-effort"
    if value not in MODES:
        raise ValueError(f"{MODE_VARIABLE} must be 'required' or 'best-effort', not {value!r}")
    return value


def refusal(report: dict[str, Layer], mode: str) -> str | None:
    """Why a worker with this ``report`` may not run models under ``mode`` (``None``: it may)."""
    if mode != "required":
        return None
    missing = [f"{name} ({report.get(name, {}).get('detail', 'not reported')})"
               for name in REQUIRED if not report.get(name, {}).get("active")]
    if not missing:
        return None
    return ("the ONNX sandbox is unavailable: this machine refused confinement layers that "
            f"{MODE_VARIABLE}=required demands: {'; '.join(missing)}. No model runs; fix the "
            f"machine, or set {MODE_VARIABLE}=best-effort to run models with fewer layers")


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)  # this process's libc: no ldconfig run
    libc.syscall.restype = ctypes.c_long
    return libc


def _errno() -> str:
    return os.strerror(ctypes.get_errno())


def set_rlimits(memory_bytes: int | None) -> Layer:
    """Address space (unless ``None``), no core files, few file descriptors."""
    done = []
    try:
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
            done.append(f"address space {memory_bytes / 2**30:.1f} GiB")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    except (OSError, ValueError) as exc:
        return layer(False, f"refused ({exc})")
    return layer(True, ", ".join([*done, "no core files", f"{NOFILE} file descriptors",
                                  "CPU time per request"]))


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


def enter_network_namespace() -> Layer:
    """Move into a new, empty network namespace (call while the process has one thread).

    With ``CAP_SYS_ADMIN`` directly; otherwise inside a new user namespace, which an
    unprivileged process may create where the kernel allows it.
    """
    libc = _libc()
    if libc.unshare(CLONE_NEWNET) == 0:
        return layer(True, "own empty network namespace")
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        return layer(True, "own empty network namespace, in a user namespace")
    return layer(False, f"not isolated (unshare(CLONE_NEWNET) refused: {_errno()})")


def drop_privileges() -> Layer:
    """As root: become ``nobody`` (no groups, no capabilities). Otherwise: nothing to drop."""
    if 0 not in os.getresuid():
        return layer(True, f"uid {os.getuid()}, not root")
    try:
        nobody = pwd.getpwnam("nobody")
        uid, gid = nobody.pw_uid, nobody.pw_gid
    except KeyError:
        uid = gid = 65534
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        return layer(False, f"still root (dropping to uid {uid} refused: {exc})")
    try:  # proof that the capabilities are gone: uid 0 cannot be taken back
        os.setresuid(0, 0, 0)
    except PermissionError:
        return layer(True, f"root dropped to uid {uid} (nobody), no capabilities")
    return layer(False, "still root (uid 0 could be taken back)")


def _landlock(libc: ctypes.CDLL) -> Layer:
    abi = libc.syscall(_LANDLOCK_CREATE, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return layer(False, f"unavailable ({_errno()})")
    fs = _FS_RIGHTS[max(v for v in _FS_RIGHTS if v <= abi)]
    fields = [fs] + ([_NET_TCP] if abi >= 4 else []) + ([_SCOPES] if abi >= 6 else [])
    packed = struct.pack(f"<{len(fields)}Q", *fields)
    attr = ctypes.create_string_buffer(packed, len(packed))
    ruleset = libc.syscall(_LANDLOCK_CREATE, attr, len(packed), 0)
    if ruleset < 0:
        return layer(False, f"refused ({_errno()})")
    try:
        if libc.syscall(_LANDLOCK_RESTRICT, ruleset, 0) != 0:
            return layer(False, f"refused ({_errno()})")
    finally:
        os.close(ruleset)
    what = ["no file access"] + (["no TCP"] if abi >= 4 else []) + (
        ["no signals or abstract sockets outside"] if abi >= 6 else [])
    return layer(True, f"ABI {abi}: {', '.join(what)}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(libc: ctypes.CDLL, *, allow_list: bool) -> Layer:
    machine = platform.machine()
    if machine not in seccomp.ARCHES:
        return layer(False, f"unavailable on {machine}")
    program = seccomp.program(machine, allow_list=allow_list, pid=os.getpid())
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog): every thread
    if libc.syscall(_SECCOMP_NR[machine], 1, 1, ctypes.byref(fprog)) != 0:
        return layer(False, f"refused ({_errno()})")
    if allow_list:
        return layer(True, f"allow-list: {len(seccomp.CPU_ALLOWED)} calls, and "
                           f"{', '.join(seccomp.CONDITIONS)} on the worker itself; EPERM for the rest")
    return layer(True, f"deny-list (CUDA worker): EPERM for {len(seccomp.DENIED)} calls and for "
                       "signals, limits, scheduling and pages of other processes")


def confine(memory_bytes: int | None, *, gpu: bool = False, network: Layer | None = None
            ) -> dict[str, Layer]:
    """Apply every layer this kernel allows; returns what each one did.

    Args:
        memory_bytes: ``RLIMIT_AS``; ``None`` leaves the address space unlimited.
        gpu: A CUDA worker: no landlock, the seccomp deny-list.
        network: What :func:`enter_network_namespace` did earlier (it is tried here
            if ``None``: root needs no single thread for it).

    Returns:
        ``{"rlimits", "network", "user", "landlock", "seccomp"}``, each
        ``{"active": bool, "detail": str}``.
    """
    report = {"rlimits": set_rlimits(memory_bytes),
              "network": network if network is not None else enter_network_namespace(),
              "user": drop_privileges()}
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        report["landlock"] = report["seccomp"] = layer(False, f"refused (no_new_privs: {_errno()})")
        return report
    report["landlock"] = (layer(False, "off (a CUDA worker loads libraries)") if gpu
                          else _landlock(libc))
    report["seccomp"] = _seccomp(libc, allow_list=not gpu)
    return report


def main() -> None:
    """``python -m agents.onnx_agents.confine``: confine this throwaway process as a CPU
    worker would be, and print the report as JSON (what ``arena doctor`` and the health
    endpoint show). The mode comes from the environment."""
    mode = resolve_mode()
    network = enter_network_namespace()
    report = confine(4 << 30, network=network)
    json.dump({"mode": mode, "layers": report, "refused": refusal(report, mode)}, sys.stdout)


if __name__ == "__main__":
    main()
