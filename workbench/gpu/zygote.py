"""The fork server: a process that imports torch once and forks each worker from there.

A worker's start-up (interpreter, `import torch`, torch._dynamo, the harness) costs seconds of
CPU per candidate, and a batch waits on it. This process pays it once, runs no candidate code
and never initialises CUDA (a driver initialised before fork is unusable in the child: checked
at start). Each worker forked from it gets a sandbox of its own before any other code runs:
  - new user, mount, PID and network namespaces, nested in the fork server's, with its own
    /proc; it is PID 1 there, so when it dies the kernel kills whatever it left behind, and
    it dies with the fork server (PR_SET_PDEATHSIG);
  - no capabilities left, then the worker's usual inner layers (workbench.gpu.confine: no new
    privileges, Landlock for its own job directory, seccomp) from the job's environment;
  - the job's allowlisted environment and directory, replacing the fork server's; its own
    directory also mounted over the fork server's, so paths torch computed at import name it.
Siblings cannot see or signal each other: each is alone in its PID namespace.

Run by workbench.gpu.forkserver as `python -m workbench.gpu.zygote SOCKET_FD`, inside the same
outer namespaces as any worker. Protocol (one JSON object per SOCK_SEQPACKET message): in,
{"op": "spawn", "id", "env", "cwd"} with the worker's stdin, log and result descriptors, and
{"op": "kill", "id"}; out, "ready" (or "unavailable" with a reason) and, per worker, "exit"
with the exit status as a shell would give it. Imports only torch and the standard library.
"""
from __future__ import annotations

import ctypes
import fcntl
import importlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time

from workbench.gpu.confine import check_call

# What every worker imports (the reference's torch.compile needs inductor).
PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "workbench.gpu.evaluate",
           "workbench.gpu.buildhook", "workbench.gpu.candidate_file",
           "workbench.gpu.runtime_guards")
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP = 1, 24
RESULT_FD = 3   # the worker's result pipe, after its stdin, stdout and stderr

_libc = ctypes.CDLL(None, use_errno=True)
_OWN_DIR: str | None = None   # the fork server's job directory (its working directory at start)


def _death_signal() -> None:
    """SIGKILL when the parent dies (the caller checks it had not died already)."""
    check_call(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PR_SET_PDEATHSIG")


def _nest() -> None:
    """New user, mount, PID and network namespaces for this process's children, this process
    mapped to the same ids as outside (no other id exists in there)."""
    uid, gid = os.getuid(), os.getgid()
    check_call(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    check_call(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def _become_namespace_init(job_dir: str | None = None, strict: bool = False) -> None:
    """In the first child of the new PID namespace: its own /proc (CUDA fails to initialise
    without one); the worker's job directory mounted over the fork server's (below); then
    every capability dropped (the user namespace gave it all of them)."""
    check_call(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
               "mount /proc")
    # What torch and its libraries computed from the fork server's environment while they
    # imported (paths under its HOME and TMPDIR: torch's precompiled-header folder, for one)
    # would name a directory the worker may not write; a dynamo compile then fails with
    # PermissionError. Seen through this mount they name the worker's own directory.
    # The probe (strict) makes sure it works here; a worker that cannot mount carries on and
    # says so in its log (its verdict, without the torch.compile baseline, says why too).
    if job_dir is not None and _OWN_DIR is not None and job_dir != _OWN_DIR:
        try:
            check_call(_libc.mount(job_dir.encode(), _OWN_DIR.encode(), None, MS_BIND | MS_REC,
                                   None), "bind the job directory")
        except OSError as e:
            if strict:
                raise
            print(f"fork server: {e}; paths torch computed there name its directory", flush=True)
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                   # effective, permitted, inheritable: none
    check_call(_libc.capset(header, data), "capset")


def _worker(request: dict) -> None:
    """Namespace init, then the worker: never returns into the fork server's loop."""
    code = 1
    try:
        _become_namespace_init(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        tempfile.tempdir = None   # the fork server's TMPDIR was read already
        from workbench.gpu import worker

        worker.main(RESULT_FD)
        code = 0
    except BaseException:  # noqa: BLE001 - said in the worker's log; the parent sees the exit
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _child(request: dict, fds: list[int], server: int) -> None:
    """The forked child: takes the worker's descriptors, nests, forks the worker as PID 1 of
    the new namespace and waits for it, exiting as it exits."""
    try:
        _death_signal()
        if os.getppid() != server:
            os._exit(1)  # the fork server died before the line above
        os.chdir(request["cwd"])   # where the job's processes are sought (and never survive)
        fds = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]  # clear of 0-3 before dup2
        for target, fd in zip((0, 1, 2, RESULT_FD), (fds[0], fds[1], fds[1], fds[2])):
            os.dup2(fd, target)
        os.closerange(RESULT_FD + 1, os.sysconf("SC_OPEN_MAX"))
        _nest()
        # The worker's parent is outside its PID namespace (getppid() says 0): whether this
        # process still lives shows as the write end of this pipe, held open only here.
        alive_r, alive_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(alive_w)
            _death_signal()
            os.set_blocking(alive_r, False)
            try:
                os.read(alive_r, 1)
                os._exit(1)  # EOF: the parent died before the death signal was set
            except BlockingIOError:
                os.close(alive_r)
            _worker(request)
        os.close(alive_r)
        for fd in (0, 1, 2, RESULT_FD):  # the worker alone holds the pipes: EOF when it dies
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
                 else 128 + os.WTERMSIG(status))
    except BaseException as e:  # noqa: BLE001
        os.write(2, f"fork server: the worker's sandbox failed: {e}\n".encode())
        os._exit(125)


def _probe(after_torch: bool = True) -> str | None:
    """Why forked workers cannot run here (None when they can): a child tries what each
    worker will do before CUDA, and asks torch whether CUDA is still usable after the fork
    (`after_torch=False`: the namespaces only, for `doctor`, without importing torch)."""
    pid = os.fork()
    if pid == 0:
        try:
            if after_torch:
                import torch

                if torch.cuda._is_in_bad_fork():
                    os._exit(5)
            _nest()
            inner = os.fork()
            if inner == 0:   # with a bind as each worker's (of a folder of its own: no effect)
                _become_namespace_init(os.path.join(_OWN_DIR, "build") if _OWN_DIR else None,
                                       strict=True)
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            os._exit(0 if status == 0 else 3)
        except BaseException:  # noqa: BLE001
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 5:
        return "CUDA was initialised while importing torch: a forked worker could not use it"
    if status:
        return f"nested namespaces are refused here (probe exit status {status:#x})"
    return None


def probe_namespaces() -> None:
    """For `doctor`, run inside the sandbox's namespaces: prints why not, or nothing."""
    reason = _probe(after_torch=False)
    if reason:
        print(reason)
        sys.exit(1)


class Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.children: dict[int, int] = {}   # id -> pid
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(self, **message) -> None:
        self.sock.send(json.dumps(message).encode())

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.sock, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                self.reap()
            if self.sock in ready and not self.handle():
                return

    def handle(self) -> bool:
        data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 3)
        if not data:
            return False  # the parent is gone
        request = json.loads(data)
        if request["op"] == "spawn":
            self.spawn(request, fds)
        elif request["op"] == "kill" and request["id"] in self.children:
            try:
                os.kill(self.children[request["id"]], signal.SIGKILL)
            except ProcessLookupError:
                pass
        for fd in fds:
            os.close(fd)
        return True

    def spawn(self, request: dict, fds: list[int]) -> None:
        if len(fds) != 3:
            self.send(op="exit", id=request["id"], code=125)
            return
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child(request, fds, server)
        self.children[request["id"]] = pid

    def reap(self) -> None:
        """Every finished child, ours or orphans handed to us as the namespace's init."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = next((j for j, p in self.children.items() if p == pid), None)
            if job is not None:
                del self.children[job]
                self.send(op="exit", id=job, code=os.waitstatus_to_exitcode(status))


def main() -> None:
    global _OWN_DIR
    sock = socket.socket(fileno=int(sys.argv[1]))
    _OWN_DIR = os.getcwd()
    # torch asks the driver how many GPUs there are while it imports (measured on the H200
    # box: a forked child then refused CUDA, "Cannot re-initialize CUDA in forked subprocess");
    # NVML answers without initialising CUDA. Each worker gets its own environment back.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    t = time.monotonic()
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        reason = _probe()
    except Exception as e:  # noqa: BLE001 - the pool starts its workers the plain way
        reason = f"preloading failed: {type(e).__name__}: {e}"
    if reason:
        sock.send(json.dumps({"op": "unavailable", "reason": reason}).encode())
        return
    server = Server(sock)
    server.send(op="ready", preload_s=round(time.monotonic() - t, 2))
    server.serve()


if __name__ == "__main__":
    main()
