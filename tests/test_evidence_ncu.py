"""Nsight Compute: parsing real `ncu --csv --page raw` output captured on the H200 (ncu 2025.3.1,
a torch softmax + fp16 matmul program), storing it as evidence, the report with % of peak bars,
and the one-line answers when ncu cannot run. CPU only."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from test_search_engine import env  # noqa: F401 - a fixture

from workbench.cli import main
from workbench.evidence import nsight, report
from workbench.gpu import ncu
from workbench.gpu import verdict as verdict_module
from workbench.gpu.verifier import record
from workbench.problems import load_problem
from workbench.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
CSV = (FIXTURES / "ncu_raw_metrics_h200.csv").read_text()


def test_parse_real_ncu_csv():
    kernels = ncu.parse_csv(CSV)
    assert [k["id"] for k in kernels] == [0, 1, 2, 3, 4]     # units row and ==PROF== skipped
    softmax = kernels[1]
    assert "cunn_SoftMaxForward" in softmax["name"]
    assert softmax["metrics"]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 84.10
    assert softmax["metrics"]["dram__bytes.sum"] == 4227735296.0   # "4,227,735,296"
    assert kernels[4]["name"] == "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
    assert kernels[4]["block"] == "(384, 1, 1)"
    assert set(ncu.METRICS) <= set(softmax["metrics"])   # every metric of the set resolved


def test_summarize_a_memory_bound_and_a_tensor_core_kernel():
    kernels = ncu.parse_csv(CSV)
    soft = ncu.summarize(kernels[1], output_elements=4096 * 65536)
    assert soft["dram_pct"] == 84.10 and soft["time_ns"] == 1044768.0
    assert soft["dram_bytes_per_s"] == pytest.approx(4227735296 / 1044768e-9)
    assert soft["dram_bytes_per_element"] == pytest.approx(4227735296 / (4096 * 65536))
    assert len(soft["stalls"]) == 5
    assert soft["stalls"] == sorted(soft["stalls"], key=lambda s: -s["cycles"])
    gemm = ncu.summarize(kernels[4], None)
    assert gemm["tensor_pct"] == 95.14 and gemm["registers"] == 168.0
    assert gemm["stalls"][0]["reason"] == "barrier"
    assert "inst_per_element" not in gemm
    assert ncu.summary(kernels, None)["main"]["name"] == kernels[1]["name"]   # longest


def test_ncu_failures_are_one_line():
    text = (FIXTURES / "ncu_no_kernels_h200.txt").read_text()
    assert ncu.parse_csv(text) == []
    assert ncu.failure(text).startswith("no kernels were profiled")
    assert ncu.failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission") == \
        "ERR_NVGPUCTRPERM - The user does not have permission"
    assert ncu.failure(CSV) is None


def test_counter_restriction_is_read_from_the_driver(tmp_path, monkeypatch):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert ncu.counters_restricted(params)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert not ncu.counters_restricted(params)
    assert not ncu.counters_restricted(tmp_path / "absent")


def test_command_profiles_only_the_bracketed_call(tmp_path):
    cmd = ncu.command("/cuda/bin/ncu", tmp_path / "log.csv", ["python", "-m", "x"])
    assert cmd[:4] == ["/cuda/bin/ncu", "--csv", "--page", "raw"]
    assert "--profile-from-start" in cmd and cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == ncu.METRICS
    assert cmd[-3:] == ["python", "-m", "x"]


@pytest.fixture
def stored(tmp_path):
    store = Store(tmp_path / "k.db")
    problem = load_problem("softmax", smoke=False)
    kid = store.add_kernel(store.upsert_problem(problem), "source")
    v = verdict_module.empty("correct")
    v.update(verified=True, time_ms=1.05, ci95_ms=[1.04, 1.06], compile_s=1.0,
             ceilings={"bytes_per_s": 4.24e12, "flops_per_s": {"float32": 51.1e12}},
             launches=[{"name": "cunn_SoftMaxForward", "us": 1044.0, "launches": 1,
                        "grid": [4096, 1, 1], "block": [1024, 1, 1], "registers": 32,
                        "shared_bytes": 0}])
    record(store, kid, v)
    return store, kid, problem


def test_profile_result_is_stored_and_reclassifies(stored):
    store, kid, problem = stored
    before = store.kernel_profiles(kid)["bottleneck"]["data"]["class"]
    result = nsight._store(store, kid, CSV, "", {"ok": True, "output_elements": 4096 * 65536},
                           0, 9.0)
    main = result["data"]["main"]
    assert "cunn_SoftMaxForward" in main["name"]
    profiles = store.kernel_profiles(kid)
    assert profiles["ncu"]["summary"].startswith("5 kernel(s); main: DRAM 84%")
    bottleneck = profiles["bottleneck"]["data"]
    assert before == "latency-bound"   # 2 GiB of minimum bytes in 1.05 ms: 48% of 4.24 TB/s
    assert bottleneck["class"] == "memory-bound"   # ncu: DRAM 84% of peak, above its SM figure
    assert "ncu: DRAM 84% of peak" in bottleneck["line"]
    v = result["data"]["verifier"]
    assert v["bandwidth_fraction"] == pytest.approx(problem.min_bytes / 1.05e-3 / 4.24e12)
    assert v["dram_bytes_over_minimum"] > 1.9     # softmax reads its input twice
    text = report.text(store, kid)
    assert "ncu DRAM" in text and "█" in text and "cunn_SoftMaxForward" in text
    assert "moved" in text and "x the minimum bytes" in text


def test_profile_failures_store_nothing(stored):
    store, kid, _ = stored
    no_kernels = (FIXTURES / "ncu_no_kernels_h200.txt").read_text()
    assert nsight._store(store, kid, no_kernels, "", {"ok": True, "output_elements": 1}, 0, 1.0) \
        == {"error": "ncu: no kernels were profiled (the call launched no CUDA kernel inside "
                     "the range)"}
    assert nsight._store(store, kid, "", "", {"ok": False, "error": "RuntimeError: boom"}, 1,
                         1.0) == {"error": "the profiled run failed: RuntimeError: boom"}
    assert "exited with code 9" in nsight._store(store, kid, "", "", None, 9, 1.0)["error"]
    assert "ncu" not in store.kernel_profiles(kid)


def test_bar():
    assert report.bar(50, width=10) == "█████░░░░░   50%"
    assert report.bar(150, width=4) == "████  150%"
    assert report.bar(None, width=4).endswith("-")


def test_profile_command_says_why_ncu_cannot_run(stored, monkeypatch):
    store, kid, _ = stored
    monkeypatch.setattr("workbench.cuda_env.list_gpus", lambda: [])
    result = CliRunner().invoke(main, ["profile", str(kid), "--db", str(store.path)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == \
        "ncu: no GPU on this machine: Nsight Compute profiles need one"
    assert f"kernel {kid}" in result.output and "bottleneck: " in result.output
    ok = CliRunner().invoke(main, ["profile", f"k{kid}", "--db", str(store.path), "--no-ncu"])
    assert ok.exit_code == 0 and "DRAM bandwidth" in ok.output
    missing = CliRunner().invoke(main, ["profile", "999", "--db", str(store.path)])
    assert missing.exit_code == 2 and "no kernel 999" in missing.output


def test_doctor_line_without_ncu(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    status, detail, fix = nsight.doctor_check([0])
    assert status == "warn" and detail.startswith("ncu not found") and "PATH" in fix
    assert nsight.unavailable([0]).startswith("ncu (Nsight Compute) not found")
    assert nsight.unavailable([]).startswith("no GPU")


def test_a_required_sandbox_means_no_ncu_profile(stored, monkeypatch):
    # ncu runs the kernel outside the sandbox's layers: where the full sandbox is required,
    # nothing is profiled, and every way in (the command, the app, the seeds) says so.
    from workbench.gpu import sandbox

    store, kid, _ = stored
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/usr/local/cuda/bin/ncu")
    monkeypatch.setattr(ncu, "counters_restricted", lambda: False)
    assert nsight.unavailable([0]) is None
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    why = nsight.unavailable([0])
    assert why.startswith("not profiled: ncu runs the kernel outside") and "require" in why
    assert nsight.profile_kernel(store, kid, Path("/nonexistent"), 0) == {"error": why}
    result = CliRunner().invoke(main, ["profile", str(kid), "--db", str(store.path), "--gpu", "0"])
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1] == f"ncu: {why}"
    assert "ncu" not in store.kernel_profiles(kid)


def test_seeds_are_profiled_before_ideation_when_ncu_can_run(env, monkeypatch, tmp_path):
    from test_evidence_prompts import EvidenceExecutor, Script, provider

    from workbench.search import Engine, SearchSettings, new_session, resume_session

    store, problem, server = env
    server.responder = Script()
    profiled = []

    def fake_profile(store_, kernel_id, cache_dir, gpu, timeout_s):
        profiled.append((kernel_id, gpu, timeout_s))
        return nsight._store(store_, kernel_id, CSV, "", {"ok": True, "output_elements": 1}, 0, 9.0)

    monkeypatch.setattr(nsight, "unavailable", lambda gpus: None if gpus else "no GPU")
    monkeypatch.setattr(nsight, "profile_kernel", fake_profile)
    executor = EvidenceExecutor()
    executor.gpus, executor.cache_dir = [3], tmp_path
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=2, ideas=1, impls=1, top_k=1, repairs=0, refines=0))
    assert Engine(store, sid, provider(server), executor).run() == "finished"
    seed = store.rows("llm_calls", "purpose = 'ideate'")[1]["kernel_id"]
    assert profiled == [(seed, 3, 300.0)]          # the reference is never profiled
    prompt = store.rows("llm_calls", "purpose = 'ideate'")[1]["prompt"]
    assert "Nsight Compute (" in prompt and "DRAM 84%" in prompt and "top stalls" in prompt
    assert "ncu" in json.loads(store.rows("llm_calls", "purpose = 'ideate'")[1]["evidence"])[
        "attached"]
    resume_session(store, sid, rounds=3)
    assert Engine(store, sid, provider(server), executor).run() == "finished"
    assert len(profiled) <= 2 and profiled.count(profiled[0]) == 1   # never twice per kernel
