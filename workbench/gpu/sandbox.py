"""The worker's sandbox, parent side: how a worker process is launched, and what this box supports.

Every candidate is LLM-written code. Its worker runs:
  - in its own user, network, PID and mount namespaces (util-linux `unshare`, own /proc): no network; uid nobody
    inside (root with util-linux < 2.38, whose capabilities reach nothing outside); PID 1 of
    its namespace is our own init (workbench.gpu.confine), and when it ends the kernel kills
    everything left, setsid'd orphans, ninja and nvcc included;
  - behind Landlock and seccomp, which the worker applies to itself before the candidate runs
    (workbench.gpu.confine): writes only to its private job directory, reads only what Python,
    torch, the toolkit, the driver and the build need, no TCP, no ptrace/process_vm_readv/bpf/mount;
  - with an allowlisted environment (no keys, no database path) and PR_SET_PDEATHSIG, so it dies
    with the process that launched it, even on kill -9.
A worker reads the shared build cache read-only and builds nothing itself: its misses go to the
clean builder (workbench.gpu.clean_build), a process launched the same way that runs no
candidate code; the parent copies the builder's build of the one key it computed into the cache
and removes every job directory, also after a killed build.

A layer this kernel lacks is named at start (startup_check) and by `doctor`; with
`--require-sandbox`, KERNEL_WORKBENCH_REQUIRE_SANDBOX=1 or `[sandbox] require = true` in
config.toml, nothing is evaluated without every layer.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import workbench
from workbench import cuda_env
from workbench.gpu import confine
from workbench.user_dirs import config_file

REQUIRE_ENV = "KERNEL_WORKBENCH_REQUIRE_SANDBOX"
READ_ENV = "KERNEL_WORKBENCH_SANDBOX_READ"
BUILD_ENV = "KWB_BUILD_DIR"
# --mount-proc (a mount namespace with this PID namespace's own /proc): without it CUDA fails
# to initialise inside the PID namespace (error 304, measured on the H200 box, 2026-12-01).
NAMESPACES = ["--user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
# nobody inside (no capabilities even there); util-linux before 2.38 can only map root.
MAPPINGS = (["--map-user=65534", "--map-group=65534"], ["--map-root-user"])
# Passed through to the worker as they are; everything else is dropped (keys, DB path, ...).
ENV_NAMES = {"PATH", "LANG", "LANGUAGE", "LD_LIBRARY_PATH", "CC", "CXX", "CUDA_HOME",
             "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
             "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "OMP_NUM_THREADS", "NVCC_PREPEND_FLAGS",
             "NVCC_APPEND_FLAGS", "CUDA_LAUNCH_BLOCKING", "TORCH_SHOW_CPP_STACKTRACES",
             "KERNEL_WORKBENCH_SIMULATED_GPU"}  # tests: workbench.gpu.simulated
ENV_PREFIXES = ("LC_",)
SYSTEM_READ = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys",
               "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
               "/etc/alternatives"]
DEVICES_RW = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]


class SandboxError(Exception):
    """The full sandbox was required and this box lacks a layer; str() is one line."""


@dataclass
class Support:
    namespaces: bool
    namespaces_detail: str
    landlock_abi: int
    seccomp: bool
    missing: list[str] = field(default_factory=list)
    unshare: list[str] = field(default_factory=list)   # argv prefix that makes the namespaces


@functools.cache
def support() -> Support:
    """Which layers this kernel gives an unprivileged process (probed, not guessed)."""
    unshare, argv = shutil.which("unshare"), []
    detail = "util-linux `unshare` not found"
    for mapping in MAPPINGS if unshare else ():
        try:
            out = subprocess.run([unshare, *NAMESPACES, *mapping, "--", "true"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            detail = f"unshare failed: {e}"
            continue
        if out.returncode == 0:
            argv = [unshare, *NAMESPACES, *mapping, "--"]
            detail = "user, network, PID and mount namespaces" + (
                "" if mapping is MAPPINGS[0] else " (root inside: util-linux < 2.38)")
            break
        detail = (out.stderr.strip().splitlines() or ["unshare failed"])[-1]
    abi = confine.landlock_abi()
    seccomp = confine.seccomp_arch() and Path("/proc/self/status").read_text().count("Seccomp:") > 0
    missing = [name for name, ok in (("namespaces", bool(argv)), ("landlock", abi > 0),
                                     ("seccomp", seccomp)) if not ok]
    return Support(bool(argv), detail, abi, seccomp, missing, argv)


def layers() -> list[tuple[str, bool, str]]:
    """(layer, available, detail) for `doctor`."""
    s = support()
    return [("namespaces", s.namespaces, s.namespaces_detail),
            ("landlock", s.landlock_abi > 0, f"ABI {s.landlock_abi}" + (
                " (files and TCP)" if s.landlock_abi >= 4 else " (files only)")
             if s.landlock_abi else "not enabled in this kernel (needs lsm=landlock)"),
            ("seccomp", s.seccomp, "filter denying ptrace, process_vm_readv, bpf, mount, ..."
             if s.seccomp else f"no filter for {os.uname().machine} or no seccomp")]


def _config() -> dict:
    try:
        data = tomllib.loads(config_file().read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    return data.get("sandbox") or {}


def required() -> bool:
    """The user's setting: refuse to evaluate without the full sandbox?"""
    if os.environ.get(REQUIRE_ENV, "").lower() in ("1", "true", "yes"):
        return True
    return bool(_config().get("require", False))


def extra_read() -> list[str]:
    """Paths the user lets workers read besides what is probed (a toolchain installed somewhere
    unusual): `[sandbox] read = [...]` in config.toml, or READ_ENV (os.pathsep-separated)."""
    paths = [p for p in os.environ.get(READ_ENV, "").split(os.pathsep) if p]
    listed = _config().get("read", [])
    paths += [str(p) for p in listed] if isinstance(listed, list) else []
    return [os.path.abspath(os.path.expanduser(p)) for p in paths]


def startup_check(require: bool = False) -> str | None:
    """A warning line when a layer is missing (None when complete); raises SandboxError instead
    when the full sandbox is required. Call once when evaluation starts."""
    missing = support().missing
    if not missing:
        return None
    text = f"the worker sandbox lacks {', '.join(missing)} on this machine " \
           "(see `kernel-workbench doctor`)"
    if require or required():
        raise SandboxError(text + "; refusing to evaluate (--require-sandbox)")
    return "warning: " + text + ": candidates run with less isolation"


@dataclass
class Launch:
    """How to start one worker: argv prefix, environment and cwd for subprocess.Popen."""
    argv: list[str]
    env: dict[str, str]
    cwd: str
    job_dir: Path
    parent: int = field(default_factory=os.getpid)
    # Build keys the parent computed for a clean builder: only these are harvested. (A worker
    # runs candidate code: nothing in its folder is ever harvested.)
    builds: set[str] = field(default_factory=set)

    def command(self, *worker_args: str) -> list[str]:
        return [*self.argv, *self.command_of("workbench.gpu.worker", *worker_args)]

    @staticmethod
    def command_of(module: str, *args: str) -> list[str]:
        """The interpreter running `module` (without the namespaces' prefix)."""
        return [sys.executable, "-m", module, *args]

    def preexec(self) -> None:
        """In the child before exec: die with the parent (kill -9 and SIGHUP included)."""
        _prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != self.parent:
            os._exit(1)  # the parent died before the line above


_prctl = ctypes.CDLL(None, use_errno=True).prctl
_prepared: set[str] = set()
_prepare_lock = threading.Lock()


@contextmanager
def worker_launch(cache_dir: Path, base_env: dict[str, str], gpu: int | None,
                  confined: bool = True):
    """One worker's launch: yields a Launch; afterwards copies its successful builds into the
    cache and removes its job directory. Popen it with preexec_fn=Launch.preexec from a thread
    that outlives the worker (the death signal follows the launching thread). `confined=False`:
    no inner layers (the fork server, which runs no candidate code and must still mount /proc
    for each worker it forks; each applies its own)."""
    s = support()
    if s.missing and required():
        raise SandboxError(f"the worker sandbox lacks {', '.join(s.missing)}; refusing to evaluate")
    _prepare(cache_dir, gpu)
    jobs = cache_dir / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    # Landlock allows reads only under paths that exist when the worker starts: a spare started
    # before the first build lands must still see the builds harvested later.
    (cache_dir / "ext").mkdir(exist_ok=True)
    job_dir = jobs / f"{os.getpid()}-{secrets.token_hex(6)}"
    for sub in ("build", "tmp"):
        (job_dir / sub).mkdir(parents=True)
    env = _env(base_env, gpu, job_dir, _harness_path(cache_dir))
    gpu_lock = cache_dir / f"gpu{gpu}.lock"
    if gpu is not None:
        gpu_lock.touch()
    policy = {"landlock": s.landlock_abi, "seccomp": s.seccomp, "write": [str(job_dir)],
              "read": _read_paths(cache_dir, env),
              "generated": [env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"]],
              "rw_files": DEVICES_RW + nvidia_devices() +
              ([str(gpu_lock)] if gpu is not None else [])}
    if confined:
        env[confine.POLICY_ENV] = json.dumps(policy)
    launch = Launch(s.unshare if s.namespaces else [], env, str(job_dir), job_dir)
    try:
        yield launch
    finally:
        if not s.namespaces:  # no PID namespace to take them down with the worker
            kill_leftovers(job_dir)
        harvest(job_dir / "build", cache_dir / "ext", launch.builds)
        shutil.rmtree(job_dir, ignore_errors=True)


def kill_leftovers(job_dir: Path) -> list[int]:
    """Kill processes still working in, or naming, a finished worker's job directory: ninja
    starts each compile in a process group of its own, which killing the worker's group misses.
    (A process that left the directory escapes this; the PID namespace catches that one.)"""
    killed = []
    needle = str(job_dir)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if os.readlink(proc / "cwd").startswith(needle) or \
                    needle.encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
        except OSError:
            pass  # gone already, or not ours to see
    return killed


def _env(base_env: dict[str, str], gpu: int | None, job_dir: Path,
         harness: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    env.update(base_env)
    private = {"HOME": job_dir, "TMPDIR": job_dir / "tmp", BUILD_ENV: job_dir / "build",
               "TORCH_EXTENSIONS_DIR": job_dir / "build", "XDG_CACHE_HOME": job_dir / "tmp",
               "TORCHINDUCTOR_CACHE_DIR": job_dir / "tmp" / "inductor",
               "TRITON_CACHE_DIR": job_dir / "tmp" / "triton",
               "CUDA_CACHE_PATH": job_dir / "tmp" / "nv", "PYTHONPATH": harness,
               # In-process compiles: inductor's worker pool needs /dev/shm, shared with the host.
               "TORCHINDUCTOR_COMPILE_THREADS": 1}
    env.update({k: str(v) for k, v in private.items()})
    env.update(USER="kwb", LOGNAME="kwb", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               MAX_JOBS=env.get("MAX_JOBS", "2"))  # a candidate is two units: .cpp and .cu
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    # The interpreter's own bin first: ninja lives there, and launchers such as pyenv's shims
    # elsewhere on PATH would need the user's home.
    bins = [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    if env.get("CUDA_HOME"):
        bins.append(os.path.join(env["CUDA_HOME"], "bin"))
    env["PATH"] = os.pathsep.join(dict.fromkeys(bins + env.get("PATH", "").split(os.pathsep)))
    return env


def _harness_path(cache_dir: Path) -> Path:
    """The worker's import path: only the workbench package (its parent may hold the database),
    outside the job directory. Code imported from the job directory counts as the candidate's
    (observe.py): from there, the harness's own reads were blamed on every candidate (measured
    on the H200), and the candidate could have swapped the modules the harness imports later."""
    path = cache_dir / "py"
    path.mkdir(parents=True, exist_ok=True)
    link, target = path / "workbench", Path(workbench.__file__).resolve().parent
    if not link.is_symlink() or link.resolve() != target:
        spare = path / f".workbench-{os.getpid()}-{secrets.token_hex(4)}"
        spare.symlink_to(target)
        os.replace(spare, link)  # atomic: a worker starting now sees the old link or the new
    return path


def _read_paths(cache_dir: Path, env: dict[str, str]) -> list[str]:
    paths = list(SYSTEM_READ) + [str(cache_dir / "ext"), str(cache_dir / "ceilings.json"),
                                 str(cache_dir / "py"),
                                 str(Path(workbench.__file__).resolve().parent)]
    paths += [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if env.get("CUDA_HOME"):
        paths.append(os.path.realpath(env["CUDA_HOME"]))
    # The compilers torch will run: CC/CXX name them when they are not on PATH (the GPU box's
    # g++ is /opt/gcc/bin/g++ by CXX, which PATH alone never found).
    named = [env[v] for v in ("CC", "CXX", "CUDAHOSTCXX") if env.get(v)]
    for tool in ("ninja", "nvcc", "c++", "g++", "gcc", "cc", "as", "ld", *named):
        found = shutil.which(tool, path=env.get("PATH"))
        if found:
            paths += [_tool_root(found), _tool_root(os.path.realpath(found))]
    return sorted(set(paths + extra_read()))


def _tool_root(tool: str) -> str:
    """What a tool needs to read: a compiler reads its whole install, not only its bin/ (gcc in
    /opt/gcc runs /opt/gcc/libexec/.../cc1plus and reads /opt/gcc/lib: seen on the H200 box).
    Never widened inside the user's home, where the verdict key and the database may live."""
    folder = Path(tool).parent
    home = Path.home().resolve()
    if folder.name != "bin" or folder.parent == home or home in folder.parents:
        return str(folder)
    return str(folder.parent)


def nvidia_devices() -> list[str]:
    """This machine's NVIDIA device files (none without a driver)."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def harvest(build_root: Path, ext_dir: Path, keys: set[str]) -> list[str]:
    """Copy each finished build of `keys` (a directory named by its key, holding a .so) into the
    cache; regular files only, never a link. Returns the keys added."""
    added = []
    for build in (build_root.iterdir() if build_root.is_dir() else []):
        key = build.name
        if key not in keys or len(key) != 64 or not any(p.is_file() and not p.is_symlink()
                                     for p in build.glob("*.so")):
            continue
        dest = ext_dir / key[:2] / key
        if any(dest.glob("*.so")):
            continue
        files = [(f, Path(f.name)) for f in build.iterdir()
                 if f.is_file() and not f.is_symlink() and not f.name.startswith(".kwb")]
        shutil.rmtree(dest, ignore_errors=True)  # an old build dir without a .so
        if publish(files, dest):
            added.append(key)
    return added


def publish(files: list[tuple[Path, Path]], dest: Path) -> bool:
    """Copy (file, path under dest) pairs into the shared cache as one rename, so readers see
    all of it or nothing. False when another copy landed first or a file went away."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.{secrets.token_hex(4)}"
    try:
        staging.mkdir()
        for source, relative in files:
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        os.rename(staging, dest)
        return True
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return False


def sweep_jobs(cache_dir: Path) -> None:
    """Remove job directories whose parent process is gone (killed with -9, say)."""
    for job in (cache_dir / "jobs").glob("*-*"):
        pid = job.name.split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(job, ignore_errors=True)


def _prepare(cache_dir: Path, gpu: int | None) -> None:
    """Once per cache: what workers can no longer write for themselves, done by trusted code:
    torch's precompiled header, and the GPU's measured ceilings."""
    key = f"{cache_dir}|{gpu is not None}"
    with _prepare_lock:
        if key in _prepared:
            return
        sweep_jobs(cache_dir)
        if not _pch_ready() or (gpu is not None and not _ceilings_ready(cache_dir)):
            env = {**os.environ, **cuda_env.build_env(), "PYTHONPATH": package_root()}
            if gpu is not None:
                env["CUDA_VISIBLE_DEVICES"] = str(gpu)
            subprocess.run([sys.executable, "-m", "workbench.gpu.prepare", str(cache_dir),
                            "gpu" if gpu is not None else "cpu"], env=env, timeout=900,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _prepared.add(key)


def package_root() -> str:
    """The folder holding the workbench package: PYTHONPATH for trusted helper processes."""
    return str(Path(workbench.__file__).resolve().parent.parent)


def _pch_ready() -> bool:
    spec = importlib.util.find_spec("torch")
    if not spec or not spec.submodule_search_locations:
        return True  # no torch here: nothing to prepare
    head = Path(spec.submodule_search_locations[0]) / "include" / "torch"
    return (head / "extension.h.gch").exists() and (head / "extension.h.sign").exists()


def _ceilings_ready(cache_dir: Path) -> bool:
    # torch is loaded already wherever a GPU pool runs (problem loading needs it).
    from workbench.gpu.timing import CEILINGS_VERSION

    try:
        table = json.loads((cache_dir / "ceilings.json").read_text())
    except (OSError, ValueError):
        return False
    names = {g.name for g in cuda_env.list_gpus()}
    return all(any(k.startswith(f"{n}|") and k.endswith(f"|{CEILINGS_VERSION}") for k in table)
               for n in names)
