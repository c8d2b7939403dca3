"""The worker sandbox, with real worker processes (no GPU): hostile-but-harmless payloads are
refused and named in the verdict, nothing of theirs is left outside the job directory, no process
of theirs survives, the database gets no forged row; workers die with a killed parent."""
from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from workbench.gpu import guards, sandbox
from workbench.gpu.executor import EvalRequest, EvalSettings

CANDIDATES = Path(__file__).parent / "candidates"
ROOT = Path(__file__).parent.parent
MISSING = sandbox.support().missing
needs_sandbox = pytest.mark.skipif(bool(MISSING), reason=f"this kernel lacks {MISSING}")
PROBLEM = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x
    def get_inputs():
        return [torch.randn(8)]
    def get_init_inputs():
        return []
""")


def _source(name: str, **subs: str) -> str:
    text = (CANDIDATES / f"{name}.py").read_text()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", value)
    return text


def _request(source: str, **settings) -> EvalRequest:
    return EvalRequest("p", PROBLEM, source, 1e-4, 1e-4, None, 0,
                       settings=EvalSettings(no_gpu=True, **settings), label="hostile")


def _pids_with(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if text.encode() in (p / "cmdline").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def _pids_in(directory: Path) -> list[int]:
    """Processes working in or naming a path under `directory` (ninja names none: its cwd)."""
    pids = set(_pids_with(str(directory)))
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.readlink(p / "cwd").startswith(str(directory)):
                pids.add(int(p.name))
        except OSError:
            pass
    return sorted(pids)


def _kinds(verdict: dict) -> set[str]:
    return {f["kind"] for f in verdict["flags"]}


def _sandbox_reason(verdict: dict) -> str:
    return next(f["reason"] for f in verdict["flags"] if f["kind"] == "sandbox")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from workbench.gpu.pool import LocalPool

    p = LocalPool(gpus=[], cache_dir=tmp_path_factory.mktemp("kwb-sandbox-cache"))
    yield p
    p.shutdown()


@pytest.fixture(autouse=True)
def nothing_left(pool):
    yield
    jobs = pool.cache_dir / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []   # job directories removed
    assert _pids_with("kwb_hostile_marker") == []


# ---- static guards -----------------------------------------------------------------------

@pytest.mark.parametrize("name, kinds", [
    ("hostile_write_home", {"process"}), ("hostile_connect", {"network"}),
    ("hostile_setsid_db", {"process"}), ("hostile_exec_base64", {"dynamic_code"})])
def test_static_flags(name, kinds):
    assert kinds <= {f["kind"] for f in guards.check(_source(name))}


def test_static_flags_follow_aliases_not_comments():
    aliased = "from os import system as run_it\nrun_it('true')\n"
    assert {f["kind"] for f in guards.check(aliased)} >= {"process"}
    harmless = "# os.system('x') and exec(base64.b64decode(s)) in a comment\nx = 'subprocess.run'\n"
    assert not {"process", "dynamic_code"} & {f["kind"] for f in guards.check(harmless)}
    assert "dynamic_code" not in {f["kind"] for f in guards.check("exec('x = 1')\n")}


# ---- what this box supports ------------------------------------------------------------

def test_layers_are_probed_and_named():
    names = [name for name, _, _ in sandbox.layers()]
    assert names == ["namespaces", "landlock", "seccomp"]
    for name, ok, detail in sandbox.layers():
        assert detail and (ok == (name not in MISSING))


def test_required_sandbox_refuses_when_a_layer_is_missing(monkeypatch):
    monkeypatch.setattr(sandbox, "support", lambda: sandbox.Support(False, "no unshare", 0, True,
                                                                    ["namespaces", "landlock"]))
    assert "namespaces, landlock" in sandbox.startup_check(require=False)
    with pytest.raises(sandbox.SandboxError, match="refusing"):
        sandbox.startup_check(require=True)
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    with pytest.raises(sandbox.SandboxError):
        sandbox.startup_check()


def test_worker_environment_is_an_allowlist(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("KERNEL_WORKBENCH_DB", "/somewhere/kernels.db")
    env = sandbox._env({"TORCH_CUDA_ARCH_LIST": "9.0"}, None, tmp_path)
    assert "AWS_SECRET_ACCESS_KEY" not in env and "KERNEL_WORKBENCH_DB" not in env
    assert env["HOME"] == str(tmp_path) and env["TORCH_CUDA_ARCH_LIST"] == "9.0"


# ---- hostile payloads, run by real sandboxed workers -----------------------------------

@needs_sandbox
def test_write_home_is_refused(pool):
    v = pool.evaluate(_request(_source("hostile_write_home")))
    reason = _sandbox_reason(v)
    assert "write /root/kwb_hostile_marker_home" in reason and "shell command" in reason
    assert "HOSTILE wrote /root" not in v["build_log"]
    for home in {str(Path.home()), "/root", "/tmp"}:
        assert not list(Path(home).glob("kwb_hostile_marker_home*"))


@needs_sandbox
def test_reading_outside_the_allowed_set_is_a_clear_verdict(pool):
    v = pool.evaluate(_request(_source("hostile_read_file")))
    assert v["status"] == "compile_error"
    assert v["error"].startswith("PermissionError") and "refused by the sandbox" in v["error"]
    assert "read /etc/passwd" in _sandbox_reason(v) and "root:" not in v["build_log"]


@needs_sandbox
def test_connect_to_a_local_port_is_refused(pool):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        v = pool.evaluate(_request(_source("hostile_connect", PORT=str(port))))
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    assert f"connect ('127.0.0.1', {port})" in _sandbox_reason(v)
    assert "HOSTILE refused" in v["build_log"] and "network" in _kinds(v)


@needs_sandbox
def test_shared_cache_is_read_only(pool):
    so = pool.cache_dir / "ext" / "ab" / ("ab" + "0" * 62) / "victim.so"
    so.parent.mkdir(parents=True, exist_ok=True)
    so.write_bytes(b"original")
    v = pool.evaluate(_request(_source("hostile_write_cache")))
    assert f"write {pool.cache_dir}/kwb_hostile_marker_cache" in _sandbox_reason(v)
    assert "HOSTILE opened for writing" not in v["build_log"] and "HOSTILE wrote" not in v["build_log"]
    assert so.read_bytes() == b"original"
    assert not (pool.cache_dir / "kwb_hostile_marker_cache").exists()


def _cli_eval(tmp_path: Path, source: str, env_extra: dict) -> tuple[dict, Path]:
    db, cand = tmp_path / "k.db", tmp_path / "cand.py"
    cand.write_text(source.replace("__DB__", str(db)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNEL_WORKBENCH_CACHE": str(tmp_path / "cache"),
           **env_extra}
    out = subprocess.run([sys.executable, "-m", "workbench", "eval", "silu", str(cand), "--no-gpu",
                          "--json", "--db", str(db)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.stdout, out.stderr
    return json.loads(out.stdout), db


@needs_sandbox
def test_parent_environment_stays_secret(tmp_path):
    canary = "sk-canary-" + secrets.token_hex(8)
    v, _ = _cli_eval(tmp_path, _source("hostile_parent_environ"), {"OPENAI_API_KEY": canary})
    assert canary not in v["build_log"] and "HOSTILE keys []" in v["build_log"]
    assert "read another process's /proc/" in _sandbox_reason(v)


@needs_sandbox
@pytest.mark.parametrize("hide", [False, True], ids=["plain", "exec_base64"])
def test_orphan_cannot_forge_a_verdict(tmp_path, hide):
    source = _source("hostile_setsid_db", DB=str(tmp_path / "k.db"))
    if hide:
        source = _source("hostile_exec_base64",
                         PAYLOAD=base64.b64encode(source.split('"""', 2)[2].encode()).decode())
    v, db = _cli_eval(tmp_path, source, {})
    assert ("dynamic_code" if hide else "process") in _kinds(v)
    time.sleep(3)   # the orphan would have written by now
    assert _pids_with("kwb_hostile_marker_orphan") == []
    rows = sqlite3.connect(db).execute("select status from evaluations").fetchall()
    assert rows == [(v["status"],)]
    assert list((tmp_path / "cache" / "jobs").iterdir()) == []


def test_payloads_do_their_harm_without_the_sandbox(tmp_path):
    """Control: outside the worker the same payloads succeed, so the tests above can fail."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-visible"}
    read = subprocess.run([sys.executable, "-c", _source("hostile_read_file")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert "HOSTILE read root:" in read.stdout
    db = tmp_path / "k.db"
    con = sqlite3.connect(db)
    con.executescript("create table kernels (id integer primary key);"
                      "create table evaluations (kernel_id, status, verdict);"
                      "insert into kernels values (1);")
    con.commit()
    subprocess.run([sys.executable, "-c", _source("hostile_setsid_db", DB=str(db))], env=env,
                   timeout=120, cwd=tmp_path)
    deadline = time.time() + 30
    while time.time() < deadline and not con.execute("select * from evaluations").fetchall():
        time.sleep(0.5)
    assert con.execute("select status from evaluations").fetchall() == [("correct",)]


# ---- no process left behind ------------------------------------------------------------

PARENT = textwrap.dedent("""
    import sys
    from workbench.gpu.executor import EvalRequest, EvalSettings
    from workbench.gpu.pool import LocalPool
    pool = LocalPool(gpus=[], cache_dir=sys.argv[1])
    pool.submit(EvalRequest("p", "", open(sys.argv[2]).read(), 1e-4, 1e-4, None, 0,
                            settings=EvalSettings(no_gpu=True)))
    print("submitted", flush=True)
    sys.stdin.read()
""")
HANG = textwrap.dedent("""
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{marker}"],
                     start_new_session=True)
    time.sleep(600)
""")


@needs_sandbox
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["kill-9", "hup"])
def test_workers_die_with_their_parent(tmp_path, sig):
    marker = "kwb_marker_" + secrets.token_hex(6)
    candidate = tmp_path / "hang.py"   # not on the parent's command line, which we search
    candidate.write_text(HANG.format(marker=marker))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), str(candidate)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _pids_with(marker):
            time.sleep(0.2)
        assert _pids_with(marker), "the hanging candidate never started"
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.time() + 10
        while time.time() < deadline and _pids_with(marker):
            time.sleep(0.2)
        assert _pids_with(marker) == []
    finally:
        parent.kill()
        for pid in _pids_with(marker):
            os.kill(pid, signal.SIGKILL)
    sandbox.sweep_jobs(tmp_path)   # what the next pool on this cache does first
    assert list((tmp_path / "jobs").iterdir()) == []


@needs_sandbox
def test_a_killed_build_leaves_no_compiler_and_no_files(pool):
    honest = (CANDIDATES / "silu_honest.py").read_text().replace(
        'functions=["silu"])', 'functions=["silu"], extra_cuda_cflags=["-DKWB_KILLED_BUILD"])')
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:   # which build processes ran, to know the kill hit a live build
        while not done.wait(0.2):
            for pid in _pids_in(pool.cache_dir):
                try:
                    seen.add(Path(f"/proc/{pid}/comm").read_text().strip())
                except OSError:
                    pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        v = pool.evaluate(_request(honest, compile_timeout_s=20))
    finally:
        done.set()
        watcher.join()
    assert v["status"] == "timeout"
    assert seen & {"ninja", "nvcc", "cicc", "cc1plus", "c++"}, seen
    time.sleep(1)
    assert _pids_in(pool.cache_dir) == []   # no ninja, nvcc, cicc or c++ of that build
    assert not list((pool.cache_dir / "ext").rglob("*KWB*"))
