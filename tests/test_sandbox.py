"""The worker sandbox, with real worker processes (no GPU): hostile-but-harmless payloads are
refused and named in the verdict, nothing of theirs is left outside the job directory, no process
of theirs survives, the database gets no forged row; workers die with a killed parent."""
from __future__ import annotations

import base64
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from workbench.gpu import guards, sandbox

from sandbox_support import (CANDIDATES, FORK_SKIP, PYTHONPATH, cli_eval, forkserver_ok,
                             start_fork_server, hostile_request, kinds, left_in,
                             pids_in, pids_with, sandbox_reason, source)

MISSING = sandbox.support().missing
needs_sandbox = pytest.mark.skipif(bool(MISSING), reason=f"this kernel lacks {MISSING}")
@pytest.fixture(scope="module", params=["plain", "forked"])
def pool(request, tmp_path_factory):
    """Workers started as processes of their own, or forked by the fork server."""
    from workbench.gpu.pool import LocalPool

    forked = request.param == "forked"
    if forked and not forkserver_ok():
        pytest.skip("no fork server on this machine: " + FORK_SKIP)
    # No spares: each test's worker (and job directory) is its own, gone when its verdict is.
    p = LocalPool(gpus=[], cache_dir=tmp_path_factory.mktemp("kwb-sandbox-cache"), spares=False,
                  fork_server=forked)
    if forked:
        start_fork_server(p)
    yield p
    p.shutdown()


@pytest.fixture(autouse=True)
def nothing_left(request):
    """After each test that evaluates in the pool (only those run twice, plain and forked)."""
    if "pool" not in request.fixturenames:
        yield
        return
    pool = request.getfixturevalue("pool")
    yield
    jobs = pool.cache_dir / "jobs"
    own = pool.forks.job_dir if pool.forks else None
    # job directories removed (but the fork server's own, which lives as long as the pool)
    assert not jobs.exists() or [j for j in jobs.iterdir() if j != own] == []
    assert left_in(pool.cache_dir, keep=own) == []   # (other runs here use other dirs)


# ---- static guards -----------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("hostile_write_home", {"process"}), ("hostile_connect", {"network"}),
    ("hostile_setsid_db", {"process"}), ("hostile_exec_base64", {"dynamic_code"})])
def test_static_flags(name, expected):
    assert expected <= {f["kind"] for f in guards.check(source(name))}


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
    env = sandbox._env({"TORCH_CUDA_ARCH_LIST": "9.0"}, None, tmp_path, tmp_path / "py")
    assert "AWS_SECRET_ACCESS_KEY" not in env and "KERNEL_WORKBENCH_DB" not in env
    assert env["HOME"] == str(tmp_path) and env["TORCH_CUDA_ARCH_LIST"] == "9.0"


# ---- hostile payloads, run by real sandboxed workers -----------------------------------

@needs_sandbox
def test_write_home_is_refused(pool):
    v = pool.evaluate(hostile_request(source("hostile_write_home")))
    reason = sandbox_reason(v)
    assert "write /root/kwb_hostile_marker_home" in reason and "shell command" in reason
    assert "HOSTILE wrote /root" not in v["build_log"]
    for home in {str(Path.home()), "/root", "/tmp"}:
        assert not list(Path(home).glob("kwb_hostile_marker_home*"))


@needs_sandbox
def test_reading_outside_the_allowed_set_is_a_clear_verdict(pool):
    v = pool.evaluate(hostile_request(source("hostile_read_file")))
    assert v["status"] == "compile_error"
    assert v["error"].startswith("PermissionError") and "refused by the sandbox" in v["error"]
    assert "read /etc/passwd" in sandbox_reason(v) and "root:" not in v["build_log"]


@needs_sandbox
def test_connect_to_a_local_port_is_refused(pool):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        v = pool.evaluate(hostile_request(source("hostile_connect", PORT=str(port))))
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    assert f"connect ('127.0.0.1', {port})" in sandbox_reason(v)
    assert "HOSTILE refused" in v["build_log"] and "network" in kinds(v)


def test_a_build_planted_under_another_key_is_not_harvested(pool):
    # The parent copies only builds it granted a CPU slot for: the worker ran candidate code.
    v = pool.evaluate(hostile_request(source("hostile_plant_build")))
    assert "HOSTILE planted" in v["build_log"]
    assert list((pool.cache_dir / "ext").glob("*/c0ffee*")) == []


def test_harvest_takes_only_the_granted_keys(tmp_path):
    granted, planted = "a" * 64, "b" * 64
    for key in (granted, planted):
        (tmp_path / "build" / key).mkdir(parents=True)
        (tmp_path / "build" / key / f"ext_{key[:12]}.so").write_bytes(b"so")
    assert sandbox.harvest(tmp_path / "build", tmp_path / "ext", {granted}) == [granted]
    assert [p.name for p in (tmp_path / "ext").glob("*/*")] == [granted]


@needs_sandbox
def test_shared_cache_is_read_only(pool):
    so = pool.cache_dir / "ext" / "ab" / ("ab" + "0" * 62) / "victim.so"
    so.parent.mkdir(parents=True, exist_ok=True)
    so.write_bytes(b"original")
    v = pool.evaluate(hostile_request(source("hostile_write_cache")))
    assert f"write {pool.cache_dir}/kwb_hostile_marker_cache" in sandbox_reason(v)
    assert "HOSTILE opened for writing" not in v["build_log"]
    assert "HOSTILE wrote" not in v["build_log"]
    assert so.read_bytes() == b"original"
    assert not (pool.cache_dir / "kwb_hostile_marker_cache").exists()


@needs_sandbox
def test_parent_environment_stays_secret(tmp_path):
    canary = "sk-canary-" + secrets.token_hex(8)
    v, _ = cli_eval(tmp_path, source("hostile_parent_environ"), {"OPENAI_API_KEY": canary},
                    "--no-gpu")
    assert canary not in v["build_log"] and "HOSTILE keys []" in v["build_log"]
    assert "read another process's /proc/" in sandbox_reason(v)


@needs_sandbox
@pytest.mark.parametrize("hide", [False, True], ids=["plain", "exec_base64"])
def test_orphan_cannot_forge_a_verdict(tmp_path, hide):
    text = source("hostile_setsid_db", DB=str(tmp_path / "k.db"))
    if hide:
        text = source("hostile_exec_base64",
                      PAYLOAD=base64.b64encode(text.split('"""', 2)[2].encode()).decode())
    v, db = cli_eval(tmp_path, text, {}, "--no-gpu")
    assert ("dynamic_code" if hide else "process") in kinds(v)
    assert "forked child process" in sandbox_reason(v)
    time.sleep(3)   # the orphan would have written by now
    assert left_in(tmp_path) == []
    rows = sqlite3.connect(db).execute("select status from evaluations").fetchall()
    assert rows == [(v["status"],)]
    assert list((tmp_path / "cache" / "jobs").iterdir()) == []


def test_payloads_do_their_harm_without_the_sandbox(tmp_path):
    """Control: outside the worker the same payloads succeed, so the tests above can fail."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-visible"}
    read = subprocess.run([sys.executable, "-c", source("hostile_read_file")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert "HOSTILE read root:" in read.stdout
    db = tmp_path / "k.db"
    con = sqlite3.connect(db)
    con.executescript("create table kernels (id integer primary key);"
                      "create table evaluations (kernel_id, status, verdict);"
                      "insert into kernels values (1);")
    con.commit()
    subprocess.run([sys.executable, "-c", source("hostile_setsid_db", DB=str(db))], env=env,
                   timeout=120, cwd=tmp_path)
    deadline = time.time() + 30
    while time.time() < deadline and not con.execute("select * from evaluations").fetchall():
        time.sleep(0.5)
    assert con.execute("select status from evaluations").fetchall() == [("correct",)]
    while time.time() < deadline and pids_in(tmp_path):
        time.sleep(0.2)   # the orphan exits right after its commit


# ---- no process left behind ------------------------------------------------------------

PARENT = textwrap.dedent("""
    import sys
    from workbench.gpu.executor import EvalRequest, EvalSettings
    from workbench.gpu.pool import LocalPool
    pool = LocalPool(gpus=[], cache_dir=sys.argv[1], spares=False, fork_server=sys.argv[3] == "1")
    if pool.forks:
        pool._launcher.submit(pool.forks.start).result()
        assert pool.forks.wait_ready(180), pool.forks.reason
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
@pytest.mark.parametrize("forked", [False, True], ids=["plain", "forked"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["kill-9", "hup"])
def test_workers_die_with_their_parent(tmp_path, sig, forked):
    if forked and not forkserver_ok():
        pytest.skip("no fork server on this machine: " + FORK_SKIP)
    marker = "kwb_marker_" + secrets.token_hex(6)
    candidate = tmp_path / "hang.py"   # not on the parent's command line, which we search
    candidate.write_text(HANG.format(marker=marker))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), str(candidate),
                               "1" if forked else "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": PYTHONPATH})
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not pids_with(marker):
            time.sleep(0.2)
        assert pids_with(marker), "the hanging candidate never started"
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.time() + 10
        while time.time() < deadline and pids_with(marker):
            time.sleep(0.2)
        assert pids_with(marker) == []
        assert left_in(tmp_path) == []   # the fork server too, when there was one
    finally:
        parent.kill()
        for pid in pids_with(marker):
            os.kill(pid, signal.SIGKILL)
    sandbox.sweep_jobs(tmp_path)   # what the next pool on this cache does first
    assert list((tmp_path / "jobs").iterdir()) == []


@needs_sandbox
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_a_killed_build_leaves_no_compiler_and_no_files(tmp_path, monkeypatch, namespaces):
    """Killed while nvcc or c++ runs (ninja starts each in its own process group): none of them
    outlives the worker, and the build's temporary files go with its job directory. Without
    namespaces (a kernel that refuses them) the parent finds and kills them instead."""
    from workbench.gpu.pool import LocalPool

    if not namespaces:
        full = sandbox.support()
        monkeypatch.setattr(sandbox, "support", lambda: sandbox.Support(
            False, "off for this test", full.landlock_abi, full.seccomp, ["namespaces"], []))
    pool = LocalPool(gpus=[], cache_dir=tmp_path, spares=False)
    honest = (CANDIDATES / "silu_honest.py").read_text().replace(
        'functions=["silu"])', 'functions=["silu"], extra_cuda_cflags=["-DKWB_KILLED_BUILD"])')
    future = pool.submit(hostile_request(honest))
    compilers = {"nvcc", "cicc", "cc1plus", "ptxas", "cudafe++"}
    seen: set[str] = set()
    deadline = time.time() + 240
    while time.time() < deadline and not seen & compilers and not future.done():
        for pid in pids_in(tmp_path):
            try:
                seen.add(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
        time.sleep(0.1)
    assert seen & compilers, f"the build never reached a compiler: {seen}"
    pool.shutdown(cancel=True)
    with pytest.raises(CancelledError):
        future.result(timeout=60)
    time.sleep(1)
    assert left_in(tmp_path) == []
    assert list((tmp_path / "jobs").iterdir()) == [] and not list(tmp_path.rglob("*.o"))


# ---- doctor and the --require-sandbox setting -------------------------------------------

def _without_landlock(monkeypatch):
    monkeypatch.setattr(sandbox, "support", lambda: sandbox.Support(
        True, "user, network and PID namespaces", 0, True, ["landlock"]))


def test_doctor_names_each_layer(monkeypatch):
    from workbench.doctor import sandbox_checks

    assert [c.name for c in sandbox_checks()] == \
        ["sandbox namespaces", "sandbox landlock", "sandbox seccomp"]
    _without_landlock(monkeypatch)
    landlock = sandbox_checks()[1]
    assert landlock.status == "warn" and "less isolation" in landlock.detail and landlock.fix
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    assert sandbox_checks()[1].status == "fail"


def test_eval_warns_or_refuses_without_the_full_sandbox(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from workbench.cli import main

    _without_landlock(monkeypatch)
    monkeypatch.delenv(sandbox.REQUIRE_ENV, raising=False)
    cand = tmp_path / "c.py"
    cand.write_text("x = 1\n")
    db = tmp_path / "k.db"
    result = CliRunner().invoke(main, ["eval", "silu", str(cand), "--no-gpu", "--db", str(db),
                                       "--require-sandbox"])
    assert result.exit_code == 2 and not db.exists()
    assert result.output.strip().splitlines() == [
        "error: the worker sandbox lacks landlock on this machine (see `kernel-workbench doctor`);"
        " refusing to evaluate (--require-sandbox)"]
    # The flag set it for the pool; monkeypatch.delenv would put it back at the end.
    os.environ.pop(sandbox.REQUIRE_ENV, None)
    config = tmp_path / "config"
    (config / "kernel-workbench").mkdir(parents=True)
    (config / "kernel-workbench" / "config.toml").write_text("[sandbox]\nrequire = true\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    assert sandbox.required()
    with pytest.raises(sandbox.SandboxError):
        with sandbox.worker_launch(tmp_path / "cache", {}, None):
            pass


def test_a_toolchain_outside_usr_is_readable_whole_but_never_the_home(monkeypatch, tmp_path):
    # gcc installed under /opt/gcc runs /opt/gcc/libexec/.../cc1plus: its bin/ alone is not enough
    # (every build failed that way on the GPU box); a tool in ~/.local/bin must not open ~/.local.
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sandbox._tool_root("/opt/gcc/bin/g++") == "/opt/gcc"
    assert sandbox._tool_root("/usr/bin/gcc") == "/usr"
    assert sandbox._tool_root(str(tmp_path / ".local" / "bin" / "ninja")) == str(tmp_path / ".local" / "bin")
    assert sandbox._tool_root(str(tmp_path / "bin" / "nvcc")) == str(tmp_path / "bin")


def test_the_compiler_named_by_cxx_is_readable(tmp_path):
    gxx = tmp_path / "opt" / "gcc" / "bin" / "g++"
    gxx.parent.mkdir(parents=True)
    gxx.write_text("#!/bin/sh\n")
    gxx.chmod(0o755)
    paths = sandbox._read_paths(tmp_path / "cache", {"PATH": "/usr/bin:/bin", "CXX": str(gxx)})
    assert str(tmp_path / "opt" / "gcc") in paths


def test_paths_the_user_adds_are_readable(monkeypatch, tmp_path):
    (tmp_path / "kernel-workbench").mkdir()
    (tmp_path / "kernel-workbench" / "config.toml").write_text(
        '[sandbox]\nread = ["/opt/toolchain", "~/sdk"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(sandbox.READ_ENV, "/srv/cuda-extra")
    paths = sandbox._read_paths(tmp_path / "cache", {"PATH": "/usr/bin"})
    for p in ("/opt/toolchain", str(tmp_path / "home" / "sdk"), "/srv/cuda-extra"):
        assert p in paths
