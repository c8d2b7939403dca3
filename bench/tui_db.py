"""A synthetic but realistic kernels.db for the TUI: sessions, rounds, ideas, kernels with
CUDA inside load_inline strings, builds and evaluations of every status, LLM calls with cost.

Deterministic for a given seed (snapshot tests rely on that). Used by
bench/tui_responsiveness.py (10,000 kernels) and by the TUI tests (a few dozen).
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from workbench import verdict_seal
from workbench.store import Store

IDEAS = [
    "Use warp-level shuffles for the row reduction instead of shared memory.",
    "Fuse the max and sum passes into one online-softmax pass (Milakov & Gimelshein).",
    "Vectorise global loads with float4 and unroll the inner loop by 4.",
    "Launch one block per row with 1024 threads and a two-stage tree reduction.",
    "Keep the row in registers when it fits; fall back to two passes otherwise.",
    "Use __expf and fold the 1/sum into a single multiply per element.",
    "Tile rows across a thread block cluster and reduce through distributed shared memory.",
    "Prefetch the next tile with cp.async while reducing the current one.",
]
STATUSES = ["correct"] * 6 + ["incorrect", "compile_error", "flagged", "timeout", "crashed"]

KERNEL = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>

// variant {variant}: {idea}
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                               int rows, int cols) {{
    int row = blockIdx.x;
    const float* in = x + (size_t)row * cols;
    float* out = y + (size_t)row * cols;
    __shared__ float red[32];
    float m = -INFINITY;
    for (int i = threadIdx.x; i < cols; i += blockDim.x * {unroll}) {{
        m = fmaxf(m, in[i]);
    }}
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    float s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += __expf(in[i] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = __expf(in[i] - m) / s;
}}

void softmax_launch(const float* x, float* y, int rows, int cols) {{
    softmax_kernel<<<rows, {threads}>>>(x, y, rows, cols);
}}
"""

cpp_source = r"""
#include <torch/extension.h>
void softmax_launch(const float* x, float* y, int rows, int cols);
torch::Tensor softmax(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}}
"""

ext = load_inline(name="softmax_{variant}", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x)
'''


def _insert(store: Store, table: str, row: dict) -> int:
    return store.db[table].insert(row).last_pk


def _insert_evaluation(store: Store, row: dict) -> int:
    # Sealed as the verifier's own (workbench.verdict_seal): these stand for real verdicts.
    kernel = store.get("kernels", row["kernel_id"])
    return _insert(store, "evaluations", {**row, "signature": verdict_seal.seal(row, kernel)})


def _problem_id(store: Store, name: str) -> int:
    path = Path(__file__).resolve().parent.parent / "problems" / f"{name}.py"
    source = path.read_text()
    digest = hashlib.sha256(source.encode()).hexdigest()
    found = store.rows("problems", "hash = ?", [digest])
    if found:
        return found[0]["id"]
    return _insert(store, "problems", {"name": name, "path": str(path), "hash": digest,
                                     "source": source, "family": "reduction",
                                     "dtype": "float32", "flops": 5 * 4096 * 65536,
                                     "min_bytes": 8 * 4096 * 65536, "atol": 1e-4,
                                     "rtol": 1e-4, "created_at": "2026-01-01T00:00:00"})


def build_db(path: str | Path, sessions: int = 1, rounds: int = 4, ideas: int = 3,
             kernels_per_idea: int = 2, seed: int = 0, problem: str = "softmax",
             pending_last_round: bool = True) -> Store:
    """Fill a new database; the last round's last idea is left unevaluated when asked."""
    rng = random.Random(seed)
    store = Store(path)
    stamp = "2026-01-01T00:00:00"
    with store.transaction():
        problem_id = _problem_id(store, problem)
        for _ in range(sessions):
            session_id = _insert(store, "sessions", {
                "problem_id": problem_id, "provider": "openai-compatible", "model": "test-model",
                "base_url": "http://127.0.0.1:1/v1", "settings": "{}", "status": "stopped",
                "started_at": stamp})
            seeds: list[int] = []
            for n in range(1, rounds + 1):
                round_id = _insert(store, "rounds", {"session_id": session_id, "n": n,
                                                   "status": "done", "started_at": stamp})
                call_id = _insert(store, "llm_calls", {
                    "session_id": session_id, "round_id": round_id, "provider": "openai",
                    "model": "test-model", "purpose": "ideate", "tokens_in": 1200,
                    "tokens_out": 400, "cost_usd": 0.0042, "latency_s": 3.1,
                    "created_at": stamp})
                new_seeds: list[tuple[float, int]] = []
                for i in range(ideas):
                    status = "vetoed" if (n + i) % 7 == 3 else "implemented"
                    idea_id = _insert(store, "ideas", {
                        "round_id": round_id, "text": IDEAS[(n * 3 + i) % len(IDEAS)],
                        "author": "human" if (n + i) % 5 == 4 else "llm", "status": status,
                        "seed_kernel_id": seeds[i % len(seeds)] if seeds else None,
                        "llm_call_id": call_id, "created_at": stamp, "updated_at": stamp})
                    if status == "vetoed":
                        continue
                    last = pending_last_round and n == rounds and i == ideas - 1
                    for j in range(kernels_per_idea):
                        source = KERNEL.format(variant=f"{n}_{i}_{j}_{session_id}",
                                               idea=IDEAS[(n * 3 + i) % len(IDEAS)],
                                               unroll=1 + j % 4, threads=256 << (j % 3))
                        kernel_id = _insert(store, "kernels", {
                            "problem_id": problem_id, "session_id": session_id,
                            "idea_id": idea_id,
                            "parent_id": seeds[i % len(seeds)] if seeds else None,
                            "source": source, "hash": hashlib.sha256(source.encode()).hexdigest(),
                            "origin": "llm", "pruned": int(rng.random() < 0.03),
                            "pinned": 0, "cleared": 0, "created_at": stamp})
                        if last:
                            continue
                        status = rng.choice(STATUSES)
                        ok = status != "compile_error"
                        build_id = _insert(store, "builds", {
                            "kernel_id": kernel_id, "ok": int(ok), "seconds": 10.5,
                            "cache_hit": 0, "log": "" if ok else "error: expected ';'",
                            "extensions": "[]", "created_at": stamp})
                        timed = status in ("correct", "flagged")
                        eager, compiled = 1.049, 0.779
                        t = eager / (0.8 + n * 0.15 + rng.random() * 0.5) if timed else None
                        flags = ([{"kind": "faster_than_floor", "reason": "0.3x the floor"}]
                                 if status == "flagged" else [])
                        _insert_evaluation(store, {
                            "kernel_id": kernel_id, "build_id": build_id, "status": status,
                            "time_ms": t, "ci95_lo_ms": t * 0.99 if t else None,
                            "ci95_hi_ms": t * 1.01 if t else None, "ref_eager_ms": eager,
                            "ref_compile_ms": compiled,
                            "speedup_eager": eager / t if t else None,
                            "speedup_compile": compiled / t if t else None,
                            "floor_ms": 0.506, "flags": json.dumps(flags),
                            "error": None if timed else f"{status}: see log",
                            "created_at": stamp})
                        if status == "correct":
                            new_seeds.append((eager / t, kernel_id))
                seeds = [k for _, k in sorted(new_seeds, reverse=True)[:3]] or seeds
    return store
