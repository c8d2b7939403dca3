"""The sandbox's inner layers, which the worker applies to itself before any candidate code runs:
PR_SET_NO_NEW_PRIVS, Landlock (file access and TCP) and a seccomp filter; then, as PID 1 of its
own PID namespace, it forks the real worker and stays behind as that namespace's init. An audit
hook notes what the candidate tried that the sandbox refuses, so the verdict can say so.

Standard library only (ctypes), like the rest of the worker. We do not use the `landlock` or
`pyseccomp` packages: the worker runs under whatever Python holds torch on the GPU box, where only
torch can be assumed; `pyseccomp` also needs libseccomp.so, which minimal images lack, and
bubblewrap is installed on neither of our boxes. The three Landlock syscalls and a dozen-
instruction BPF program are small enough to own; the parent (workbench.gpu.sandbox) adds the
namespaces with util-linux `unshare` and tells this module what to allow through POLICY_ENV.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import struct
import sys

POLICY_ENV = "KWB_SANDBOX_POLICY"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every arch.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
ALL_FS_ABI1 = (1 << 13) - 1
REFER, TRUNCATE = 1 << 13, 1 << 14
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
READ = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AUDIT_ARCH_X86_64 = 0xC000003E
# What a kernel needs none of and an escape needs: tracing and reading other processes, BPF,
# (un)mounting, new namespaces, kernel modules and keys, io_uring (which seccomp cannot see into).
DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "pivot_root": 155, "chroot": 161,
    "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
}


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version, 0 when Landlock is off or unknown."""
    abi = _libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(1))
    return max(int(abi), 0)


def seccomp_arch() -> bool:
    """Whether we have a syscall table for this machine (x86_64 only, the one we can test)."""
    return platform.machine() == "x86_64"


def check_call(result: int, what: str) -> int:
    """A libc call's result, or OSError with errno's text when it failed."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _no_new_privs() -> None:
    check_call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")


def _landlock(abi: int, read: list[str], write: list[str], rw_files: list[str]) -> None:
    handled = ALL_FS_ABI1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    attr = struct.pack("<Q", handled)
    if abi >= 4:  # no rule for any port: no TCP bind or connect at all
        attr += struct.pack("<Q", NET_BIND_TCP | NET_CONNECT_TCP)
    if abi >= 6:
        attr += struct.pack("<Q", SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = check_call(_libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), buf,
                                  ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)),
                    "landlock_create_ruleset")
    try:
        for paths, rights in ((read, READ), (write, handled), (rw_files, READ_FILE | WRITE_FILE)):
            for path in paths:
                _allow(fd, path, rights & handled)
        check_call(_libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd),
                                 ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(fd)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this machine: nothing to allow
    try:
        if not os.path.isdir(f"/proc/self/fd/{target}"):
            rights &= FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, target), 12)
        check_call(_libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset),
                                 ctypes.c_int(1), rule, ctypes.c_uint32(0)),
                   f"landlock_add_rule {path}")
    finally:
        os.close(target)


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _seccomp() -> None:
    denied = sorted(DENIED_X86_64.values())
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    eperm, allow, kill = 0x00050000 | errno.EPERM, 0x7FFF0000, 0x80000000
    prog = [_bpf(ld_abs, 4), _bpf(jeq, AUDIT_ARCH_X86_64, jt=1), _bpf(ret, kill), _bpf(ld_abs, 0),
            _bpf(jge, 0x40000000, jt=len(denied) + 1)]  # x32 ABI calls: refused
    prog += [_bpf(jeq, nr, jt=len(denied) - i) for i, nr in enumerate(denied)]
    prog += [_bpf(ret, allow), _bpf(ret, eperm)]
    filt = ctypes.create_string_buffer(b"".join(prog), 8 * len(prog))
    fprog = struct.pack("<HxxxxxxQ", len(prog), ctypes.addressof(filt))
    check_call(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0),
               "seccomp")


def _python_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    return sorted(paths)


def _become_init() -> None:
    """PID 1 of the namespace: fork the worker, reap whatever it orphans, exit as it exits. When
    this process ends the kernel kills everything left in the namespace (setsid or not)."""
    child = os.fork()
    if child == 0:
        return
    while True:
        pid, status = os.wait()
        if pid == child:
            # PID 1 cannot kill itself with a signal; 128 + N is the shell's convention.
            os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
                     else 128 + os.WTERMSIG(status))


def restrict(read: list[str], write: list[str], rw_files: list[str]) -> None:
    """No new privileges, then Landlock and seccomp where this kernel has them, for a process
    that runs a file it did not write (the problem loader's children); the worker's own policy
    goes through enter()."""
    _no_new_privs()
    abi = landlock_abi()
    if abi:
        _landlock(abi, read + _python_paths(), write, rw_files)
    if seccomp_arch():
        _seccomp()


def enter() -> None:
    """Apply the policy the parent put in the environment (no policy: nothing to do)."""
    raw = os.environ.pop(POLICY_ENV, None)
    if raw is None:
        return
    policy = json.loads(raw)
    _no_new_privs()
    if os.getpid() == 1:
        _become_init()  # from here on this is the worker; PID 1 only reaps and runs no candidate code
    read = policy["read"] + _python_paths()
    # The CUDA driver writes to its own process's /proc entries at initialisation (without this:
    # error 304, measured on the H200 box). Only this process's own entries, never /proc at
    # large (without the PID namespace, /proc/<parent>/mem is the parent's memory).
    write = policy["write"] + [f"/proc/{os.getpid()}"]
    if policy.get("landlock"):
        _landlock(policy["landlock"], read, write, policy["rw_files"])
    if policy.get("seccomp"):
        _seccomp()
    from workbench.gpu import observe

    observe.install(read, write + policy["rw_files"], origin=policy["write"][0],
                    generated=policy.get("generated", []))
