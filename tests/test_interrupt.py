"""Interrupted is not crashed: a kernel whose verification is stopped (Ctrl-C, cancel, quit) gets
no verdict and is verified again on resume, with no repair call; a second Ctrl-C quits now."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import CancelledError

import pytest

from llm_server import FakeExecutor, FakeLLMServer, Reply
from test_search_engine import PROBLEM, Script, calls, env, provider, start  # noqa: F401
from workbench import events
from workbench.search import Engine, resume_session
from workbench.store import Store

IDEA = json.dumps([{"kind": "memory", "idea": "Use float4 vectorized loads and stores."}])


def test_cancel_during_verification_stores_no_verdict_and_resume_verifies(env):
    store, problem, server = env
    server.responder = Script(ideas=IDEA)
    sid, engine = start(store, problem, server, rounds=1, ideas=1, impls=2, repairs=1)
    engine.executor = FakeExecutor(delay_s=30)
    seen = []

    def cancel_when_verifying(event):
        seen.append(event)
        if isinstance(event, events.EvaluationStarted):
            threading.Thread(target=engine.cancel, args=("interrupted",)).start()

    engine.on_event = cancel_when_verifying
    t0 = time.monotonic()
    assert engine.run() == "stopped"
    assert time.monotonic() - t0 < 10   # the 30 s verifications were stopped, not waited for
    assert store.rows("evaluations") == []
    stopped = [e for e in seen if isinstance(e, events.EvaluationsCancelled)]
    assert stopped and {k for e in stopped for k in e.kernel_ids} <= \
        {k["id"] for k in store.rows("kernels")}
    assert not [e for e in seen if isinstance(e, events.VerdictReady)]
    assert calls(store, sid, "repair") == []

    resume_session(store, sid)
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    assert all(store.latest_evaluation(k["id"])["status"] == "correct"
               for k in store.rows("kernels"))
    assert calls(store, sid, "repair") == []


@pytest.fixture
def cli_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               KERNEL_WORKBENCH_CACHE=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    env.pop("KERNEL_WORKBENCH_DB", None)
    problem = tmp_path / "relu.py"
    problem.write_text(PROBLEM)
    return env, problem, tmp_path / "k.db"


class Lines:
    """A subprocess's merged output, line by line, with waiting for a line."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.seen, self._q = proc, [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._q.put(line)
        self._q.put(None)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.seen):
            line = self._q.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"exited before {text!r}:\n{''.join(self.seen)}")
            self.seen.append(line)

    def rest(self, timeout: float) -> str:
        self.proc.wait(timeout=timeout)
        while (line := self._q.get(timeout=timeout)) is not None:
            self.seen.append(line)
        return "".join(self.seen)


def _run(args, env) -> tuple[subprocess.Popen, Lines]:
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, Lines(proc)


def _slow_kernel(until: float) -> str:
    # Importing it takes until `until` (wall clock): the first run is interrupted while it
    # builds; on resume it passes. It never calls nvcc (the load_inline is never reached) and
    # gives the static guards nothing to flag, so --no-gpu gives `unverified`: nothing to repair.
    return ("import time\nimport torch.nn as nn\n"
            "from torch.utils.cpp_extension import load_inline\n\n"
            'CUDA = "__global__ void relu(const float* x, float* y, int n) { '
            'int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] > 0 ? x[i] : 0; }"\n'
            f"time.sleep(max(0.0, {until!r} - time.time()))\n"
            "if time.time() < 0:\n"
            '    ext = load_inline(name="relu", cpp_sources="", cuda_sources=CUDA)\n\n\n'
            "class ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        return x * (x > 0)\n")


def test_ctrl_c_mid_verification_then_resume(cli_env):
    env, problem, db = cli_env

    def answer(prompt, request):
        if "Propose" in prompt:
            return Reply(text=f"```json\n{IDEA}\n```")
        return Reply(text=f"```python\n{_slow_kernel(time.time() + 15)}```")

    with FakeLLMServer(responder=answer) as server:
        base = ["--provider", "openai-compatible", "--model", "local", "--base-url",
                server.openai_url, "--retries", "0", "--db", str(db)]
        proc, out = _run([str(problem), *base, "--no-gpu", "--rounds", "1", "--ideas", "1",
                          "--impls", "1"], env)
        out.wait_for("kernel 1: compiling")       # its worker is running
        proc.send_signal(signal.SIGINT)
        text = out.rest(timeout=60)
        assert proc.returncode == 1, text
        assert "kernel 1: interrupted, no verdict" in text
        assert "stopped: interrupted" in text and "Traceback" not in text
        store = Store(db)
        assert store.rows("evaluations") == []
        assert store.get("sessions", 1)["stop_reason"] == "interrupted"

        proc, out = _run(["--resume", "1", *base], env)
        text = out.rest(timeout=240)
        assert proc.returncode == 0, text
        assert "session 1 finished" in text
        statuses = [e["status"] for e in store.rows("evaluations")]
        assert statuses == ["unverified"], text
        purposes = [c["purpose"] for c in store.rows("llm_calls")]
        assert purposes == ["ideate", "implement"]      # no repair call


def test_second_ctrl_c_quits_now(cli_env):
    env, problem, db = cli_env
    with FakeLLMServer() as server:
        server.push(Reply(text="late", delay_s=120))
        proc, out = _run([str(problem), "--provider", "openai-compatible", "--model", "local",
                          "--base-url", server.openai_url, "--retries", "0", "--no-gpu",
                          "--db", str(db)], env)
        out.wait_for("ideate call for the reference")
        proc.send_signal(signal.SIGINT)
        out.wait_for("Ctrl-C again to quit now")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        text = out.rest(timeout=30)
        assert time.monotonic() - t0 < 5, text
        assert proc.returncode == 130, text
        assert "quitting now" in text and "Traceback" not in text
        assert Store(db).get("sessions", 1)["status"] == "stopped"


def test_pool_cancel_kills_the_worker_and_gives_no_verdict(tmp_path):
    from workbench.gpu.executor import EvalSettings
    from workbench.gpu.pool import LocalPool
    from workbench.gpu.verifier import request_for
    from workbench.problems import load_problem

    (tmp_path / "relu.py").write_text(PROBLEM)
    problem = load_problem(tmp_path / "relu.py", smoke=False)
    phases = queue.Queue()
    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache",
                     on_phase=lambda label, phase: phases.put(phase))
    try:
        request = request_for(problem, _slow_kernel(time.time() + 120),
                              EvalSettings(no_gpu=True), label="kernel 1")
        future = pool.submit(request)
        assert phases.get(timeout=60) == "compiling"
        t0 = time.monotonic()
        pool.cancel([future])
        with pytest.raises(CancelledError):
            future.result(timeout=30)
        assert time.monotonic() - t0 < 10
        assert not pool._workers
    finally:
        pool.shutdown(cancel=True)
