"""The seccomp filters of an ONNX worker: an allow-list for CPU workers, a deny-list for CUDA ones.

A CPU worker, once confined, only reads requests from a pipe, runs onnxruntime on memory it
already has, and writes replies. Tracing real workers (``strace -f`` over the sandbox's
tests, the hostile corpus and exported CNN, MLP, transformer and residual models, one and
two intra-op threads, batches through the pipe and the shared region, a run terminated at
its deadline, a worker killed mid-operator) found these calls after the filter goes on:
``readv write prlimit64 getrusage brk mmap munmap mprotect madvise futex rt_sigprocmask
clone3 set_robust_list rseq gettid getpid``. :data:`CPU_ALLOWED` is that set plus what
the same code paths reach elsewhere (``read``/``writev``, ``exit``/``exit_group`` and the
signal return, clocks and sleeps, ``sched_yield``, ``getrandom``, ``mremap``). Everything
else answers ``EPERM``.

Some calls are allowed only on the worker itself (:data:`CONDITIONS`): ``prlimit64`` with
pid 0 (the worker moves its own CPU limit; on its parent it would change the service's
limits), ``tgkill`` to its own thread group (``abort()``), ``sched_setaffinity`` of
itself, and ``clone`` only for a thread (``CLONE_VM | CLONE_THREAD``, no namespace flag:
no fork, no new namespace). ``clone3`` answers ``ENOSYS``, so glibc falls back to
``clone``, whose flags a filter can read (``clone3`` passes them in memory).

A CUDA worker's driver opens device files, ``ioctl``\\ s them and loads libraries while
a session is created; nobody here has traced it, so it gets :data:`DENIED` instead: the
calls that reach other processes (signals, pidfds, ptrace, another process's memory,
limits, scheduling or pages), start programs or processes, create sockets or
namespaces, mount, load code into the kernel (bpf, modules, kexec), use keyrings,
io_uring or userfaultfd, change credentials or the clock; plus the same conditions, and
no ``TIOCSTI``/``TIOCLINUX`` ioctl (typing into a terminal). A deny-list misses what it
does not name; that is why CPU workers, which run almost every model, get the allow-list.

The programs are classic BPF, built here (no libseccomp): x86_64 and aarch64; on x86_64
the x32 ABI and foreign architectures (``int 0x80``) are refused.
"""

from __future__ import annotations

import errno
import struct

# name: (x86_64, aarch64); None where the architecture has no such call
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66), "close": (3, 57),
    "mmap": (9, 222), "mprotect": (10, 226), "munmap": (11, 215), "brk": (12, 214),
    "mremap": (25, 216), "madvise": (28, 233), "futex": (202, 98), "set_robust_list": (273, 99),
    "rseq": (334, 293), "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135),
    "rt_sigreturn": (15, 139), "sigaltstack": (131, 132), "exit": (60, 93), "exit_group": (231, 94),
    "getpid": (39, 172), "gettid": (186, 178), "getppid": (110, 173), "getuid": (102, 174),
    "geteuid": (107, 175), "getgid": (104, 176), "getegid": (108, 177),
    "clock_gettime": (228, 113), "clock_getres": (229, 114), "gettimeofday": (96, 169),
    "time": (201, None), "nanosleep": (35, 101), "clock_nanosleep": (230, 115),
    "sched_yield": (24, 124), "getcpu": (309, 168), "getrandom": (318, 278),
    "restart_syscall": (219, 128), "getrusage": (98, 165), "sched_getaffinity": (204, 123),
    "sched_setaffinity": (203, 122), "prlimit64": (302, 261), "tgkill": (234, 131),
    "clone": (56, 220), "clone3": (435, 435), "ioctl": (16, 29),
    # reaching other processes
    "kill": (62, 129), "tkill": (200, 130), "pidfd_open": (434, 434), "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "process_madvise": (440, 440), "kcmp": (312, 272),
    "sched_setscheduler": (144, 119), "sched_setparam": (142, 118), "sched_setattr": (314, 274),
    "setpriority": (141, 140), "ioprio_set": (251, 30), "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    # new processes, programs, namespaces, sockets
    "fork": (57, None), "vfork": (58, None), "execve": (59, 221), "execveat": (322, 281),
    "unshare": (272, 97), "setns": (308, 268), "socket": (41, 198), "socketpair": (53, 199),
    "connect": (42, 203),
    # mounts and file handles
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "move_mount": (429, 429), "open_tree": (428, 428), "fsopen": (430, 430),
    "fsmount": (432, 432), "fsconfig": (431, 431), "fspick": (433, 433),
    "mount_setattr": (442, 442), "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265), "lookup_dcookie": (212, 18),
    # the kernel's own surfaces
    "bpf": (321, 280), "perf_event_open": (298, 241), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60), "iopl": (172, None),
    "ioperm": (173, None), "personality": (135, 92), "syslog": (103, 116), "vhangup": (153, 58),
    # credentials and clocks
    "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145), "setregid": (114, 143),
    "setresuid": (117, 147), "setresgid": (119, 149), "setgroups": (116, 159),
    "setfsuid": (122, 151), "setfsgid": (123, 152), "capset": (126, 91),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
}

CPU_ALLOWED = (
    "read", "write", "readv", "writev", "close", "mmap", "mprotect", "munmap", "brk", "mremap",
    "madvise", "futex", "set_robust_list", "rseq", "rt_sigaction", "rt_sigprocmask",
    "rt_sigreturn", "sigaltstack", "exit", "exit_group", "getpid", "gettid", "getppid", "getuid",
    "geteuid", "getgid", "getegid", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "nanosleep", "clock_nanosleep", "sched_yield", "getcpu", "getrandom", "restart_syscall",
    "getrusage", "sched_getaffinity",
)
"""Allowed unconditionally in a CPU worker (every other call not in :data:`CONDITIONS`: EPERM)."""

DENIED = tuple(name for name in SYSCALLS if list(SYSCALLS).index(name) >= list(SYSCALLS).index("kill")
               and name not in ("sched_setscheduler", "sched_setparam", "sched_setattr", "setpriority",
                                "ioprio_set", "migrate_pages", "move_pages"))
"""Refused (EPERM) in a CUDA worker; the calls about other processes that are harmless on
the worker itself are in :data:`CONDITIONS` instead."""

CLONE_THREAD_FLAGS = 0x00000100 | 0x00010000  # CLONE_VM | CLONE_THREAD
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C

# name: (argument, mask, value): allowed only when args[argument] & mask == value (its low
# 32 bits: pids and clone flags are ints to the kernel). "self" is the worker's pid.
CONDITIONS: dict[str, tuple[int, int, int | str]] = {
    "prlimit64": (0, 0xFFFFFFFF, 0),
    "tgkill": (0, 0xFFFFFFFF, "self"),
    "sched_setaffinity": (0, 0xFFFFFFFF, 0),
    "clone": (0, CLONE_THREAD_FLAGS | CLONE_NAMESPACES, CLONE_THREAD_FLAGS),
}
_SELF_ONLY_IN_DENY_LIST = {  # the CUDA profile's: harmless on the worker itself
    "sched_setscheduler": (0, 0xFFFFFFFF, 0), "sched_setparam": (0, 0xFFFFFFFF, 0),
    "sched_setattr": (0, 0xFFFFFFFF, 0), "setpriority": (1, 0xFFFFFFFF, 0),
    "ioprio_set": (1, 0xFFFFFFFF, 0), "migrate_pages": (0, 0xFFFFFFFF, 0),
    "move_pages": (0, 0xFFFFFFFF, 0),
}

ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column in SYSCALLS, audit arch
ALLOW, DENY, NO_SYSCALL = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
_LD, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06


def _assemble(items: list[tuple]) -> bytes:
    """Resolve labels (``("label", name)``) in jumps; conditional jumps go forward <= 255."""
    labels, index = {}, 0
    for item in items:
        if item[0] == "label":
            labels[item[1]] = index
        else:
            index += 1
    out, index = [], 0
    for item in items:
        if item[0] == "label":
            continue
        code, jt, jf, k = item
        offsets = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= o <= 255 for o in offsets):
            raise ValueError(f"seccomp jump out of range at instruction {index}")
        out.append(struct.pack("<HBBI", code, offsets[0], offsets[1], k))
        index += 1
    return b"".join(out)


def program(machine: str, *, allow_list: bool, pid: int) -> bytes:
    """The filter for ``machine``: :data:`CPU_ALLOWED` (``allow_list``) or :data:`DENIED`.

    Raises:
        KeyError: An architecture this module has no syscall numbers for.
    """
    column, audit_arch = ARCHES[machine]
    conditions = dict(CONDITIONS) if allow_list else {**CONDITIONS, **_SELF_ONLY_IN_DENY_LIST}
    listed = CPU_ALLOWED if allow_list else DENIED
    nr = {name: SYSCALLS[name][column] for name in (*listed, *conditions, "clone3", "ioctl")}
    items: list[tuple] = [(_LD, 0, 0, 4), (_JEQ, 0, "deny", audit_arch), (_LD, 0, 0, 0)]
    if machine == "x86_64":  # x32 calls carry bit 30
        items.append((_JGE, "deny", 0, 0x40000000))
    target = "allow" if allow_list else "deny"
    items += [(_JEQ, target, 0, nr[name]) for name in listed if nr[name] is not None]
    items += [(_JEQ, f"if_{name}", 0, nr[name]) for name in conditions if nr[name] is not None]
    items.append((_JEQ, "enosys", 0, nr["clone3"]))
    if not allow_list:
        items.append((_JEQ, "if_ioctl", 0, nr["ioctl"]))
    items.append((_RET, 0, 0, DENY if allow_list else ALLOW))
    for name, (arg, mask, value) in conditions.items():  # jumps go forward only
        items += [("label", f"if_{name}"), (_LD, 0, 0, 16 + 8 * arg), (_AND, 0, 0, mask),
                  (_JEQ, "allow", "deny", pid if value == "self" else value)]
    if not allow_list:
        items += [("label", "if_ioctl"), (_LD, 0, 0, 16 + 8 * 1), (_JEQ, "deny", 0, _TIOCSTI),
                  (_JEQ, "deny", "allow", _TIOCLINUX)]
    items += [("label", "allow"), (_RET, 0, 0, ALLOW), ("label", "deny"), (_RET, 0, 0, DENY),
              ("label", "enosys"), (_RET, 0, 0, NO_SYSCALL)]
    return _assemble(items)
