"""Hardware evidence: parsing cuobjdump / ptxas output (real captured fixtures), occupancy, the
bottleneck classification, and storing a verdict's evidence as profiles rows. CPU only."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.evidence import diagnose, occupancy
from workbench.evidence.record import store_verdict
from workbench.gpu import launch_trace, resources
from workbench.gpu import verdict as verdict_module
from workbench.gpu.verifier import record
from workbench.problems import load_problem
from workbench.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
# torch.cuda.get_device_properties on the lent H200 (sm_90).
H200 = {"name": "NVIDIA H200", "arch": "sm_90", "sms": 132, "l2_bytes": 60 * 2**20,
        "smem_per_sm": 233472, "smem_per_block_optin": 232448, "regs_per_sm": 65536,
        "max_threads_per_sm": 2048, "warp_size": 32}
CEILINGS = {"bytes_per_s": 4.24e12,
            "flops_per_s": {"float32": 51.1e12, "float16": 700e12, "bfloat16": 700e12}}


def test_cuobjdump_res_usage_fixture():
    # Captured: nvcc 13.0 -gencode sm_90, cuobjdump 13.5 -res-usage on the .so.
    kernels = resources.parse_res_usage((FIXTURES / "cuobjdump_res_usage_sm90.txt").read_text())
    by_name = {k["name"]: k for k in kernels}
    assert set(by_name) == {"tiled_sum", "heavy", "relu_kernel"}
    assert by_name["tiled_sum"]["registers"] == 47
    assert by_name["tiled_sum"]["shared_bytes"] == 5248
    assert by_name["heavy"]["stack_bytes"] == 10272
    assert by_name["relu_kernel"] == {"symbol": "_Z11relu_kernelPKfPfl", "name": "relu_kernel",
                                      "registers": 10, "shared_bytes": 1024, "stack_bytes": 0,
                                      "local_bytes": 0, "constant_bytes": 552}


def test_cuobjdump_of_a_torch_extension_and_of_the_gpu_box():
    # Captured: the workbench's own build of tests/candidates/silu_honest.py (nvcc 13.0, sm_90),
    # and on the H200 box (nvcc 13, cuobjdump there).
    kernels = resources.parse_res_usage(
        (FIXTURES / "cuobjdump_res_usage_silu_ext.txt").read_text())
    assert [(k["name"], k["registers"], k["shared_bytes"]) for k in kernels] == [
        ("silu_tail", 17, 0), ("silu_kernel", 32, 0)]
    box = {k["name"]: k for k in resources.parse_res_usage(
        (FIXTURES / "cuobjdump_res_usage_h200.txt").read_text())}
    assert box["spill"]["registers"] == 168 and box["add"]["shared_bytes"] == 2048
    ptxas = {k["name"]: k for k in resources.parse_ptxas(
        (FIXTURES / "ptxas_v_h200.txt").read_text())}
    assert ptxas["add"] == {"symbol": "_Z3addPKfS0_Pfi", "name": "add", "registers": 14,
                            "shared_bytes": 1024, "stack_bytes": 0, "spill_store_bytes": 0,
                            "spill_load_bytes": 0}


def test_ptxas_verbose_fixture():
    # Captured: nvcc 13.0 -Xptxas -v for the same source.
    kernels = {k["name"]: k for k in resources.parse_ptxas(
        (FIXTURES / "ptxas_v_sm90.txt").read_text())}
    assert kernels["heavy"]["spill_store_bytes"] == 43396
    assert kernels["heavy"]["spill_load_bytes"] == 98232
    assert kernels["heavy"]["registers"] == 32
    assert kernels["tiled_sum"]["shared_bytes"] == 4224
    assert kernels["relu_kernel"]["shared_bytes"] == 0 and kernels["relu_kernel"]["registers"] == 10


@pytest.mark.parametrize("symbol, name", [
    ("_Z9tiled_sumILi32EEvPKfPfi", "tiled_sum"), ("_Z11relu_kernelPKfPfl", "relu_kernel"),
    ("_ZN2ns6kernelEPf", "kernel"), ("_ZN12_GLOBAL__N_19my_kernelEPKfPfi", "my_kernel"),
    ("void tiled_sum<32>(float const*, float*, int)", "tiled_sum"),
    ("relu_kernel(float const*, float*, long)", "relu_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, F>(int, F)",
     "vectorized_elementwise_kernel"),
])
def test_base_name(symbol, name):
    assert resources.base_name(symbol) == name


def test_resource_usage_says_why_when_nothing_was_built(tmp_path):
    assert "no built extension" in resources.resource_usage([])["error"]
    assert resources.built_objects(tmp_path, "ab" * 32) == []


@pytest.mark.skipif(not (shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists())
                    or resources.find_cuobjdump() is None, reason="needs nvcc and cuobjdump")
def test_resource_usage_of_a_real_shared_object(tmp_path):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    key = "cd" * 32
    build = tmp_path / "ext" / key[:2] / key
    build.mkdir(parents=True)
    (build / "k.cu").write_text(
        "__global__ void scale_kernel(float* y, int n) {\n"
        "  __shared__ float s[256]; s[threadIdx.x] = threadIdx.x; __syncthreads();\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= s[255 - threadIdx.x];\n}\n")
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90",
                    str(build / "k.cu"), "-o", str(build / "k_ext.so")], check=True, timeout=300)
    found = resources.resource_usage(resources.built_objects(tmp_path, key))
    assert found["tool"] == "cuobjdump"
    (kernel,) = found["kernels"]
    assert kernel["name"] == "scale_kernel"
    assert kernel["shared_bytes"] == 1024 + 1024 and kernel["registers"] > 0


def test_occupancy_limits():
    full = occupancy.theoretical(32, 0, 256, H200)
    assert full["occupancy"] == 1.0 and full["limiter"] == "warps"
    regs = occupancy.theoretical(128, 0, 256, H200)   # 4096 regs a warp: 16 warps fit
    assert regs["occupancy"] == 0.25 and regs["limiter"] == "registers"
    smem = occupancy.theoretical(32, 100 * 1024, 256, H200)
    assert smem["blocks_per_sm"] == 2 and smem["limiter"] == "shared memory"
    small = occupancy.theoretical(16, 0, 32, H200)     # 32 blocks of one warp: half the SM
    assert small["occupancy"] == 0.5 and small["limiter"] == "blocks"
    assert occupancy.theoretical(None, 0, 256, H200) is None
    assert occupancy.threads_of([16, 16, 1]) == 256


def _verdict(time_ms: float, launches: list[dict]) -> dict:
    v = verdict_module.empty("correct")
    v.update(verified=True, time_ms=time_ms, ci95_ms=[0.99 * time_ms, 1.01 * time_ms],
             ceilings=CEILINGS, device=H200, launches=launches)
    return v


def _launch(name: str, us: float, n: int = 1, regs: int = 32, block=(256, 1, 1)) -> dict:
    return {"name": name, "us": us, "launches": n, "grid": [1024, 1, 1], "block": list(block),
            "registers": regs, "shared_bytes": 0, "est_occupancy_pct": 90}


def test_classify_memory_bound():
    # 1 GiB moved in 0.3 ms: 3.58 TB/s, 84% of the copy ceiling.
    data = diagnose.runtime(_verdict(0.3, [_launch("copy_kernel(float*)", 295.0)]),
                            flops=2**28, min_bytes=2**30, dtype="float32")
    assert 0.8 < data["bandwidth_fraction"] < 0.9
    c = diagnose.classify(data)
    assert c["class"] == "memory-bound" and "84% of measured DRAM bandwidth" in c["line"]
    assert diagnose.percent(0.003) == "0.3%" and diagnose.percent(0.5) == "50%"


def test_classify_compute_bound_uses_the_dtype_ceiling():
    flops = 2 * 4096 ** 3
    data = diagnose.runtime(_verdict(0.25, [_launch("gemm_kernel(half*)", 249.0, regs=168)]),
                            flops=flops, min_bytes=3 * 2 * 4096 ** 2, dtype="float16")
    assert data["flops_dtype"] == "float16"
    assert diagnose.classify(data)["class"] == "compute-bound"
    assert "float16 FLOP ceiling" in diagnose.classify(data)["line"]


def test_classify_latency_bound_names_occupancy():
    data = diagnose.runtime(_verdict(2.0, [_launch("slow(float*)", 1990.0, regs=128)]),
                            flops=2**28, min_bytes=2**30, dtype="float32")
    c = diagnose.classify(data)
    assert c["class"] == "latency-bound"
    assert "occupancy 25% (limited by registers)" in c["line"]


def test_classify_launch_bound():
    data = diagnose.runtime(_verdict(0.05, [_launch("a(float*)", 3.0, n=4),
                                            _launch("b(float*)", 2.0, n=3)]),
                            flops=None, min_bytes=2**20, dtype="float32")
    assert data["launches"] == 7 and data["gpu_busy_fraction"] == pytest.approx(0.1)
    c = diagnose.classify(data)
    assert c["class"] == "launch-bound" and "7 launches" in c["line"]


def test_classify_prefers_ncu_throughputs():
    data = diagnose.runtime(_verdict(2.0, [_launch("k(float*)", 1990.0)]), flops=None,
                            min_bytes=2**30, dtype="float32")
    assert diagnose.classify(data)["class"] == "latency-bound"
    c = diagnose.classify(data, {"dram_pct": 91.0, "sm_pct": 20.0})
    assert c["class"] == "memory-bound" and "ncu: DRAM 91%" in c["line"]


def test_runtime_needs_a_timed_verdict():
    assert diagnose.runtime(verdict_module.empty("incorrect"), 1, 1, "float32") is None


def test_launches_from_a_kineto_trace():
    # Shape of the kernel events torch.profiler's export_chrome_trace writes (CUPTI activity).
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "b_kernel(float*)", "ts": 20, "dur": 6.0,
         "args": {"grid": [64, 1, 1], "block": [128, 1, 1], "registers per thread": 40,
                  "shared memory": 4096, "est. achieved occupancy %": 50}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 3.0},
        {"ph": "X", "cat": "kernel", "name": "a_kernel(float*)", "ts": 10, "dur": 2.5,
         "args": {"grid": [8, 1, 1], "block": [256, 1, 1], "registers per thread": 16,
                  "shared memory": 0}},
        {"ph": "X", "cat": "kernel", "name": "a_kernel(float*)", "ts": 30, "dur": 2.5,
         "args": {"grid": [8, 1, 1], "block": [256, 1, 1], "registers per thread": 16,
                  "shared memory": 0}}]}
    launches = launch_trace.launches_from_trace(trace)
    assert [k["name"] for k in launches] == ["a_kernel(float*)", "b_kernel(float*)",
                                             "a_kernel(float*)"]
    summary = launch_trace.summarize(launches)
    assert [(k["name"], k["launches"], k["us"]) for k in summary] == [
        ("b_kernel(float*)", 1, 6.0), ("a_kernel(float*)", 2, 5.0)]
    assert summary[0]["registers"] == 40 and summary[0]["block"] == [128, 1, 1]


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "kernels.db")


def test_record_stores_resources_runtime_and_bottleneck(store):
    problem = load_problem("silu", smoke=False)
    pid = store.upsert_problem(problem)
    kid = store.add_kernel(pid, "source")
    v = _verdict(1.0, [_launch("_Z11silu_kernelPKfPfl", 990.0, regs=24)])
    v.update(compile_s=1.0, cache_key="ab",
             resources={"tool": "cuobjdump", "kernels": [
                 {"symbol": "_Z11silu_kernelPKfPfl", "name": "silu_kernel", "registers": 24,
                  "shared_bytes": 1024, "stack_bytes": 0, "local_bytes": 0,
                  "constant_bytes": 552}]})
    record(store, kid, v)
    profiles = store.kernel_profiles(kid)
    assert set(profiles) == {"resources", "runtime", "bottleneck"}
    assert profiles["resources"]["summary"] == "silu_kernel: 24 regs, 1024 B smem, 0 B stack"
    runtime = profiles["runtime"]["data"]
    assert runtime["bandwidth_fraction"] == pytest.approx(problem.min_bytes / 1e-3 / 4.24e12)
    assert runtime["kernels"][0]["own"] and runtime["kernels"][0]["occupancy"] == 1.0
    assert profiles["bottleneck"]["data"]["class"] in diagnose.CLASSES
    assert profiles["bottleneck"]["summary"].startswith(profiles["bottleneck"]["data"]["class"])


def test_untimed_verdict_stores_no_runtime_evidence(store):
    pid = store.upsert_problem(load_problem("silu", smoke=False))
    kid = store.add_kernel(pid, "source")
    v = verdict_module.empty("compile_error")
    v["resources"] = None
    eid = record(store, kid, v)
    store_verdict(store, kid, eid, v)
    assert store.kernel_profiles(kid) == {}


def test_lineage_and_evidence_choice(store):
    pid = store.upsert_problem(load_problem("silu", smoke=False))
    a = store.add_kernel(pid, "a")
    b = store.add_kernel(pid, "b", parent_id=a)
    c = store.add_kernel(pid, "c", parent_id=b)
    assert store.lineage(c) == [c, b, a]
    assert store.lineage(c, limit=2) == [c, b]
    assert store.evidence_choice(c) is None
    store.set_evidence_choice(c, ["runtime"], "try cp.async")
    store.set_evidence_choice(c, ["runtime", "ncu"], "use TMA")
    assert store.evidence_choice(c)["attached"] == ["runtime", "ncu"]
    assert store.evidence_choice(c)["note"] == "use TMA"


TENSOR_CORE_CANDIDATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void hgemm(const __half* a, const __half* b, __half* c, int n) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" ::);
    c[0] = __float2half(0.f);
}
void launch(const void* a, const void* b, void* c, int n) {
    hgemm<<<1, 32>>>((const __half*)a, (const __half*)b, (__half*)c, n);
}
"""
ext = load_inline(name="hgemm", cpp_sources="void launch(const void*, const void*, void*, int);",
                  cuda_sources=cuda_src, functions=["launch"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        ext.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), a.shape[0])
        return c
'''


@pytest.mark.parametrize("dtype, flagged", [("float16", False), ("bfloat16", False),
                                            ("float32", True)])
def test_precision_guard_allows_tensor_cores_on_half_precision_problems(dtype, flagged):
    from workbench.gpu import guards

    kinds = {f["kind"] for f in guards.check(TENSOR_CORE_CANDIDATE, dtype)}
    assert ("precision" in kinds) is flagged
    fp8 = TENSOR_CORE_CANDIDATE.replace("#include <cuda_fp16.h>",
                                        "#include <cuda_fp8.h>\n__nv_fp8_e4m3 q;")
    assert "precision" in {f["kind"] for f in guards.check(fp8, dtype)}


@pytest.mark.parametrize("name", ["matmul_fp16", "matmul_bf16", "matmul_tall_skinny_fp16",
                                  "attention_causal_fp16"])
def test_half_precision_library_problems(name):
    problem = load_problem(name, smoke=False)
    assert problem.dtype in ("float16", "bfloat16")
    assert problem.atol == problem.rtol == 1e-2
    assert problem.flops and problem.min_bytes
