"""`kernel-workbench doctor`: is this machine ready to build, check and time kernels?

Each check gives ok / warn / fail; every failure carries a one-line fix. No API key value is
ever printed, only whether it is set.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbench import cuda_env

KEY_VARS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_COMPATIBLE_API_KEY")


@dataclass
class Check:
    name: str
    status: str   # ok | warn | fail
    detail: str
    fix: str = ""


def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def run_checks() -> list[Check]:
    checks = [Check("python", "ok" if sys.version_info >= (3, 11) else "fail",
                    sys.version.split()[0], "install Python 3.11 or newer")]
    try:
        import torch
    except ImportError as e:
        checks.append(Check("torch", "fail", f"not importable ({e})",
                            "pip install torch (a CUDA build)"))
        torch = None
    torch_cuda = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    if torch:
        checks.append(Check("torch", "ok" if torch_cuda else "fail",
                            f"{torch.__version__}, built for CUDA {torch_cuda or 'none (CPU-only build)'}",
                            "install a CUDA build of torch (pip install torch from the CUDA index)"))

    nvcc = shutil.which("nvcc")
    home = cuda_env.find_cuda_home()
    if home and not nvcc:
        nvcc = str(home / "bin" / "nvcc")
    if not nvcc:
        checks.append(Check("nvcc", "fail", "not found",
                            "install the CUDA toolkit and put its bin/ on PATH"))
    else:
        version = _nvcc_version(nvcc)
        real = Path(nvcc).resolve()
        match = bool(version and torch_cuda and version.split(".")[0] == torch_cuda.split(".")[0])
        checks.append(Check(
            "nvcc", "ok" if match or not torch_cuda else "fail",
            f"{nvcc}" + (f" -> {real}" if str(real) != nvcc else "") +
            f", CUDA {version or '?'}" + (f" (torch: {torch_cuda})" if torch_cuda else ""),
            f"install CUDA toolkit {torch_cuda} or a torch built for CUDA {version}"))

    env_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        checks.append(Check("CUDA_HOME", "fail", "no CUDA toolkit root found",
                            "install the CUDA toolkit (e.g. /usr/local/cuda) and set CUDA_HOME"))
    elif env_home and Path(env_home) == home:
        checks.append(Check("CUDA_HOME", "ok", env_home))
    else:
        guess = str(Path(nvcc).parent.parent) if nvcc else "none"
        note = (f"unset; torch would guess {guess}" if not env_home else f"{env_home} (wrong)")
        broken = guess != str(home) and not (Path(guess) / "include" / "cuda_runtime.h").exists()
        checks.append(Check(
            "CUDA_HOME", "warn",
            f"{note}; the toolkit is at {home} (the workbench sets this for its own builds)"
            + ("; other builds fail with 'cannot find -lcudart'" if broken else ""),
            f"export CUDA_HOME={home}"))

    ninja = shutil.which("ninja")
    checks.append(Check("ninja", "ok" if ninja else "fail", ninja or "not found",
                        "pip install ninja"))

    gpus = cuda_env.list_gpus()
    if gpus:
        for g in gpus:
            checks.append(Check(f"gpu {g.index}", "ok", f"{g.name}, compute capability "
                                f"{g.compute_cap}, driver {g.driver}, {g.memory_mib} MiB"))
        if torch and not torch.cuda.is_available():
            checks.append(Check("torch sees GPUs", "fail", "nvidia-smi lists GPUs, torch does not",
                                "install a torch whose CUDA version this driver supports"))
    else:
        checks.append(Check("gpu", "warn", "no GPU found: kernels can be built and statically "
                                           "checked (--no-gpu) but not run or timed",
                            "run the workbench on a machine with an NVIDIA GPU to time kernels"))
    from workbench.evidence.nsight import doctor_check

    checks.append(Check("ncu (Nsight Compute)", *doctor_check([g.index for g in gpus])))
    checks.append(Check("build arch", "ok", cuda_env.arch_list(gpus) +
                        (" (this machine's GPUs only)" if gpus else " (no GPU: default)")))

    checks += sandbox_checks()
    checks.append(fork_server_check())
    checks.append(daemon_check())
    for var in KEY_VARS:
        checks.append(Check(var, "ok" if os.environ.get(var) else "warn",
                            "set" if os.environ.get(var) else "not set",
                            f"export {var}=... to use that provider"))
    return checks


SANDBOX_FIXES = {
    "namespaces": "install util-linux and allow unprivileged user namespaces "
                  "(sysctl user.max_user_namespaces>0; on Ubuntu also "
                  "kernel.apparmor_restrict_unprivileged_userns=0)",
    "landlock": "boot a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y, "
                "landlock in the lsm= list)",
    "seccomp": "use an x86_64 kernel with CONFIG_SECCOMP_FILTER",
}


def sandbox_checks() -> list[Check]:
    """One line per layer of the worker sandbox; a missing layer fails when it is required."""
    from workbench.gpu import sandbox

    required = sandbox.required()
    return [Check(f"sandbox {name}", "ok" if ok else ("fail" if required else "warn"),
                  detail if ok else f"unavailable: {detail}; candidates run with less isolation",
                  SANDBOX_FIXES[name]) for name, ok, detail in sandbox.layers()]


def fork_server_check() -> Check:
    """Whether the app and `run` can fork workers (seconds each) instead of starting them."""
    from workbench.gpu import forkserver

    ok, detail = forkserver.check()
    return Check("fork server", "ok" if ok else "warn", detail,
                 "" if ok else "workers are slower to start, not less isolated; see `sandbox "
                               "namespaces` above")


def daemon_check() -> Check:
    """Whether `eval` can share a verifier daemon, and which ones run now."""
    from workbench.gpu import daemon_client, daemon_link
    from workbench.gpu.pool import default_cache_dir

    if not daemon_link.enabled():
        return Check("verifier daemon", "ok", f"off ({daemon_link.DISABLE_ENV}=0): each eval "
                                              "verifies in its own process")
    try:
        daemon_link.address(None, default_cache_dir())
    except daemon_link.DaemonUnavailable as e:
        return Check("verifier daemon", "warn", str(e),
                     f"set {daemon_link.DIR_ENV} to a short, private directory")
    live = [s for _, s in daemon_client.running() if s]
    detail = ", ".join(f"pid {s['pid']} (GPUs {','.join(map(str, s['gpus'])) or 'none'}, "
                       f"{s['served']} verdicts)" for s in live)
    return Check("verifier daemon", "ok", f"running: {detail}" if live else
                 f"not running (eval starts one; it exits after "
                 f"{daemon_link.idle_seconds():.0f} s without work)")
