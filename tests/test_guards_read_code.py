"""Static guards read code, not words: honest habits are notes, cheats stay flags."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.gpu import guards

CANDIDATES = Path(__file__).parent / "candidates"

HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"


def _candidate(cuda: str, forward: str = "return ext.run(x)", init: str = "", extra: str = "") -> str:
    return (HEADER + extra + f'cuda_src = r"""\n{cuda}\n"""\n'
            'ext = load_inline(name="t", cpp_sources="", cuda_sources=cuda_src, functions=["run"])\n'
            "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        {init or 'pass'}\n    def forward(self, x):\n        {forward}\n")


def _kinds(source: str, dtype: str = "float32") -> tuple[set, set]:
    flags, notes = guards.review(source, dtype)
    return {f["kind"] for f in flags}, {n["kind"] for n in notes}


KERNEL = "__global__ void k(const float* x, float* y, int n) { y[0] = x[0]; }"


@pytest.mark.parametrize("cuda", [
    KERNEL + "\nvoid launch(int n) { int half = n / 2; k<<<half, 256>>>(0, 0, n); }",
    KERNEL + "\n// an fp16 version would use __half2 here; later\n/* half2 loads */",
    KERNEL + '\nvoid f() { printf("bf16 would be faster"); }',
])
def test_precision_words_in_names_comments_and_strings_do_not_flag(cuda):
    flags, _ = _kinds(_candidate(cuda, extra='"""Module doc: we keep fp32, not fp16 or tf32."""\n'))
    assert "precision" not in flags


@pytest.mark.parametrize("cuda", [
    KERNEL + "\n__global__ void h(const __half* x) {}",
    KERNEL + "\n__global__ void h(const float* x) { half v = __float2half(x[0]); }",
    KERNEL + "\n__global__ void h(const float* x) { half* p = (half*)x; }",
    KERNEL + '\nvoid g() { asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"); }',
])
def test_precision_types_still_flag(cuda):
    assert "precision" in _kinds(_candidate(cuda))[0]


def test_half_precision_problems_may_use_tensor_cores_but_not_fp8():
    tensor_cores = _candidate(KERNEL + "\n__global__ void h(const __half* x, nv_bfloat16* y) {}")
    assert "precision" not in _kinds(tensor_cores, "float16")[0]
    assert "precision" not in _kinds(tensor_cores, "bfloat16")[0]
    fp8 = _candidate(KERNEL + "\n__global__ void h(const __nv_fp8_e4m3* x) {}")
    assert "precision" in _kinds(fp8, "float16")[0]


def test_torch_precision_switches_flag_in_python_code_not_comments():
    on = _candidate(KERNEL, extra="torch.backends.cuda.matmul.allow_tf32 = True\n")
    assert "precision" in _kinds(on)[0]
    commented = _candidate(KERNEL, extra="# torch.backends.cuda.matmul.allow_tf32 = True\n")
    assert _kinds(commented)[0] == set()


def test_per_size_buffer_cache_is_a_note_but_address_keys_flag():
    per_size = _candidate(KERNEL, init="self.bufs = {}",
                          forward="self.bufs[x.numel()] = torch.empty_like(x)\n"
                                  "        return ext.run(x)")
    flags, notes = _kinds(per_size)
    assert "caching" not in flags and "caching" in notes
    keyed = (CANDIDATES / "cheat_pointer_cache.py").read_text()
    assert "caching" in _kinds(keyed)[0]


def test_debug_printing_is_a_note_but_raw_descriptor_writes_flag():
    debug = _candidate(KERNEL, forward="sys.stdout.write('run\\n')\n        return ext.run(x)",
                       extra="import sys\n")
    flags, notes = _kinds(debug)
    assert "io" not in flags and "debug_output" in notes
    assert "io" in _kinds(_candidate(KERNEL, extra="import os\nos.write(1, b'x')\n"))[0]
    # Paths are strings by nature: /proc in a string literal still counts.
    assert "io" in _kinds(_candidate(KERNEL, extra="ENV = open('/proc/self/environ').read()\n"))[0]


def test_commented_out_cheats_do_not_flag():
    source = _candidate(KERNEL, extra="# s = torch.cuda.Stream()\n# import threading\n"
                                      "# torch.manual_seed(0)\n")
    assert _kinds(source)[0] == set()


def test_pytorch_layers_around_a_custom_kernel_are_a_note():
    """KernelBench's mnist2 example style: nn layers kept, one op replaced by a kernel."""
    source = _candidate(KERNEL, init="self.conv = nn.Conv2d(1, 10, 5); self.fc = nn.Linear(10, 10)",
                        forward="x = ext.run(torch.relu(self.conv(x)))\n"
                                "        return torch.log_softmax(self.fc(x), dim=1)")
    flags, notes = _kinds(source)
    assert flags == set() and "pytorch_compute" in notes
    only_torch = (CANDIDATES / "cheat_pytorch_only.py").read_text()
    assert {"no_cuda_kernel", "pytorch_compute"} <= _kinds(only_torch)[0]


def test_triton_candidates_have_a_kernel():
    source = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
              "def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
              "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
              "    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)\n\n"
              "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
              "        y = torch.empty_like(x)\n        add_kernel[(1,)](x, y, x.numel(), BLOCK=1024)\n"
              "        return y\n")
    assert _kinds(source) == (set(), set())
    assert "precision" in _kinds(source.replace("tl.load(x_ptr + i, mask=i < n)",
                                                "tl.load(x_ptr + i, mask=i < n).to(tl.float16)"))[0]


def test_code_text_keeps_line_numbers():
    source = 'x = 1  # fp16\ns = """\nint half = 2; // note\n__global__ void k() {}\n"""\n'
    text = guards.code_text(source)
    assert text.count("\n") == source.count("\n")
    assert "fp16" not in text and "note" not in text and "__global__" in text
