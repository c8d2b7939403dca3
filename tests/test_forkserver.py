"""The fork server (workbench.gpu.zygote): workers forked from a process that imported torch
once, each in a sandbox of its own. Real processes, a simulated GPU turn (no CUDA)."""
from __future__ import annotations

import os
import secrets
import signal
import textwrap
from concurrent.futures import CancelledError

import pytest

from workbench.gpu.executor import EvalRequest, EvalSettings, EvaluationCancelled
from workbench.gpu.forkserver import ForkedProcess
from workbench.gpu.pool import LocalPool
from workbench.gpu.simulated import TOY_CANDIDATE, TOY_PROBLEM

from test_pool_workers import record_launches, wait_for
from sandbox_support import (FORK_SKIP, forkserver_ok, left_in, pids_in, pids_with,
                             start_fork_server)

pytestmark = pytest.mark.skipif(not forkserver_ok(), reason="no fork server here: " + FORK_SKIP)


def request(source: str, label: str = "k") -> EvalRequest:
    return EvalRequest("twice", TOY_PROBLEM, source, 1e-4, 1e-4, None, 0,
                       settings=EvalSettings(), label=label)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    os.environ["KERNEL_WORKBENCH_SIMULATED_GPU"] = "0.1"
    p = LocalPool(gpus=[0], cache_dir=tmp_path_factory.mktemp("kwb-fork-cache"),
                  verify_workers=2, spares=False, fork_server=True)
    start_fork_server(p)
    yield p
    p.shutdown()
    os.environ.pop("KERNEL_WORKBENCH_SIMULATED_GPU", None)


def probe(body: str) -> str:
    """A candidate that runs `body` at import and prints what it finds (its build log)."""
    return "import os, sys\n" + textwrap.dedent(body) + "\n" + TOY_CANDIDATE


def test_a_forked_worker_gives_the_plain_verdict(pool, tmp_path):
    workers = record_launches(pool)
    forked = pool.submit(request(TOY_CANDIDATE)).result()
    assert [type(w.proc) for w in workers] == [ForkedProcess]
    plain = LocalPool(gpus=[0], cache_dir=tmp_path, spares=False)
    try:
        alone = plain.submit(request(TOY_CANDIDATE)).result()
    finally:
        plain.shutdown()
    assert plain.forks is None
    assert forked["status"] == alone["status"] == "flagged"   # no CUDA kernel in the toy
    assert forked["trials"] == alone["trials"] > 0 and forked["gpu"] == alone["gpu"]


def test_each_worker_is_alone_in_its_namespace(pool):
    """Siblings cannot see each other (nor the fork server): PID 1 and 2 only, no capability,
    no network interface but loopback."""
    v = pool.submit(request(probe("""
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
        print("KWB pids", pids, "caps", caps, "nets", sorted(os.listdir("/sys/class/net")))
    """))).result()
    line = next(l for l in v["build_log"].splitlines() if l.startswith("KWB pids"))
    assert line.startswith("KWB pids [1, 2] caps ['0000000000000000']"), line


def test_paths_computed_in_the_fork_server_name_the_workers_own_directory(pool):
    """torch computes some paths from the fork server's HOME and TMPDIR while it imports (its
    precompiled-header folder, for one: a forked worker's reference compile failed there with
    PermissionError). Through them a worker writes into its own directory, never the server's."""
    home = str(pool.forks.job_dir)
    v = pool.submit(request(probe(f"""
        os.makedirs({home!r} + "/tmp/kwb-inherited", exist_ok=True)
        open({home!r} + "/tmp/kwb-inherited/probe", "w").write("x")
        print("KWB own", os.path.exists(os.environ["TMPDIR"] + "/kwb-inherited/probe"))
        import torch._inductor.codecache as codecache
        header = getattr(codecache, "_HEADER_DIR", os.environ["TMPDIR"])
        os.makedirs(header, exist_ok=True)
        print("KWB torch", header.startswith({home!r}))
    """))).result()
    assert "KWB own True" in v["build_log"], (v.get("error"), v["build_log"][-1500:])
    assert "KWB torch" in v["build_log"], (v.get("error"), v["build_log"][-1500:])
    assert not (pool.forks.job_dir / "tmp" / "kwb-inherited").exists()


@pytest.mark.parametrize("strict", [False, True])
def test_a_worker_that_cannot_mount_carries_on_unless_probing(tmp_path, monkeypatch, strict):
    """The fork server's folder gone (nothing to mount over): a worker starts anyway, where the
    probe, which decides whether workers fork at all, refuses."""
    from workbench.gpu import zygote

    monkeypatch.setattr(zygote, "_OWN_DIR", str(tmp_path / "gone"))
    pid = os.fork()
    if pid == 0:
        try:
            zygote._nest()
            inner = os.fork()
            if inner == 0:
                zygote._become_namespace_init(str(tmp_path), strict=strict)
                os._exit(0)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]))
        except BaseException:  # noqa: BLE001
            os._exit(7)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert (code != 0) == strict, code


def test_a_setsid_orphan_dies_with_its_worker(pool):
    marker = "kwb_orphan_" + secrets.token_hex(6)
    v = pool.submit(request(probe(f"""
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"],
                         start_new_session=True)
    """))).result()
    assert "process" in {f["kind"] for f in v["flags"]}
    assert left_in(pool.cache_dir, keep=pool.forks.job_dir) == []
    assert pids_with(marker) == []


def test_a_hostile_worker_cannot_signal_the_fork_server(pool):
    v = pool.submit(request(probe("""
        import signal
        for pid in range(2, 40000):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    """))).result()
    assert v["status"] in ("flagged", "crashed")
    assert pool.forks.ready()
    assert pool.submit(request(TOY_CANDIDATE)).result()["status"] == "flagged"


def test_cancel_kills_a_forked_worker(pool):
    workers, phases = record_launches(pool), []
    pool.on_phase = lambda label, phase: phases.append(phase)
    future = pool.submit(request(probe("import time\ntime.sleep(600)")))
    try:
        assert wait_for(lambda: "compiling" in phases)
    finally:
        pool.on_phase = None
    pool.cancel([future])
    with pytest.raises((CancelledError, EvaluationCancelled)):
        future.result(timeout=30)
    assert workers[0].proc.wait(timeout=10) is not None
    assert left_in(pool.cache_dir, keep=pool.forks.job_dir) == []


def test_the_pool_carries_on_when_the_fork_server_dies(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_SIMULATED_GPU", "0.1")
    p = LocalPool(gpus=[0], cache_dir=tmp_path, spares=False, fork_server=True)
    try:
        start_fork_server(p)
        server = pids_in(tmp_path)   # `unshare` and the fork server, working in its directory
        assert server
        for pid in server:
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: p.forks.state == "gone")
        workers = record_launches(p)
        assert p.submit(request(TOY_CANDIDATE)).result()["status"] == "flagged"
        assert [type(w.proc).__name__ for w in workers] == ["Popen"]
        assert p.forks.state == "gone" and "exited" in p.forks.reason
    finally:
        p.shutdown()
    assert left_in(tmp_path) == []


def test_turned_off_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_FORK_SERVER", "0")
    p = LocalPool(gpus=[], cache_dir=tmp_path)
    try:
        assert p.forks is None
    finally:
        p.shutdown()


def test_doctor_says_whether_workers_can_fork(monkeypatch):
    from workbench.doctor import fork_server_check
    from workbench.gpu import sandbox

    monkeypatch.setenv("KERNEL_WORKBENCH_FORK_SERVER", "1")   # the test run turns it off
    check = fork_server_check()
    assert check.status == "ok" and "nested namespaces work" in check.detail
    monkeypatch.setenv("KERNEL_WORKBENCH_FORK_SERVER", "0")
    assert fork_server_check().detail.startswith("off")
    monkeypatch.setenv("KERNEL_WORKBENCH_FORK_SERVER", "1")
    monkeypatch.setattr(sandbox, "support", lambda: sandbox.Support(
        False, "no unshare", 7, True, ["namespaces"]))
    check = fork_server_check()
    assert check.status == "warn" and "needs the sandbox's namespaces" in check.detail and check.fix
