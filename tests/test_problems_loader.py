"""The problem loader and `kernel-workbench problems`: a bad file is one clear line naming it.

CPU only; shapes and FLOPs come from the meta device, so this is quick.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.cli import main
from workbench.problems import ProblemError, load_problem

HEADER = "import torch\nimport torch.nn as nn\n"

GOOD_MODEL = """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""
GOOD_INPUTS = """
def get_inputs():
    return [torch.randn(8, 16)]
"""
GOOD_INIT = """
def get_init_inputs():
    return []
"""

CRFM = ["matmul_fp32", "conv2d", "softmax", "layernorm", "conv2d_relu_maxpool"]


def write(tmp_path: Path, name: str, *parts: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + "".join(textwrap.dedent(p) for p in parts))
    return path


def load_error(path, smoke: bool = True) -> str:
    with pytest.raises(ProblemError) as info:
        load_problem(path, smoke=smoke)
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    assert "Traceback" not in message
    assert message.strip() == message and message
    # No chained exception to print as a traceback
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__
    return message


# -- loader errors --------------------------------------------------------------------------

def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "syntax", GOOD_MODEL, "def get_inputs(:\n    return []\n", GOOD_INIT)
    message = load_error(path)
    line = HEADER.count("\n") + textwrap.dedent(GOOD_MODEL).count("\n") + 1
    assert message.startswith(f"{path}:{line}: syntax error")


def test_error_while_importing(tmp_path):
    path = write(tmp_path, "imports", "raise RuntimeError('setup\\nfailed here')\n", GOOD_MODEL,
                 GOOD_INPUTS, GOOD_INIT)
    message = load_error(path)
    assert message.startswith(str(path)) and "importing failed" in message
    assert "RuntimeError" in message and "setup" in message and "failed here" in message


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_definition(tmp_path, missing):
    parts = {"Model": GOOD_MODEL, "get_inputs": GOOD_INPUTS, "get_init_inputs": GOOD_INIT}
    del parts[missing]
    path = write(tmp_path, f"no_{missing}", *parts.values())
    message = load_error(path)
    assert message.startswith(str(path))
    assert f"missing `{missing}`" in message


def test_model_not_a_module(tmp_path):
    path = write(tmp_path, "plain", "class Model:\n    def forward(self, x):\n        return x\n",
                 GOOD_INPUTS, GOOD_INIT)
    message = load_error(path)
    assert message.startswith(str(path)) and "nn.Module" in message


def test_model_is_a_function_not_a_class(tmp_path):
    path = write(tmp_path, "func", "def Model():\n    return None\n", GOOD_INPUTS, GOOD_INIT)
    assert "nn.Module" in load_error(path)


def test_exception_inside_get_inputs(tmp_path):
    path = write(tmp_path, "raises", GOOD_MODEL, """
        def get_inputs():
            raise ValueError("batch size unknown\\nsee the docs")
        """, GOOD_INIT)
    message = load_error(path)
    assert message.startswith(str(path))
    assert "get_inputs()" in message and "ValueError" in message
    assert "batch size unknown" in message and "see the docs" in message


def test_exception_inside_get_init_inputs_and_constructor(tmp_path):
    path = write(tmp_path, "bad_init", GOOD_MODEL, GOOD_INPUTS,
                 "def get_init_inputs():\n    return 1 / 0\n")
    message = load_error(path)
    assert "get_init_inputs()" in message and "ZeroDivisionError" in message
    path = write(tmp_path, "bad_ctor", """
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
        """, GOOD_INPUTS, GOOD_INIT)
    message = load_error(path)
    assert message.startswith(str(path)) and "Model(*get_init_inputs())" in message


@pytest.mark.parametrize("body", ["return [1, 2.0, 'x']", "return []", "return None",
                                  "return torch.randn(4)"])
def test_get_inputs_without_tensors(tmp_path, body):
    path = write(tmp_path, "no_tensors", GOOD_MODEL, f"def get_inputs():\n    {body}\n",
                 GOOD_INIT)
    message = load_error(path)
    assert message.startswith(str(path))
    assert "get_inputs() must return a list holding tensors" in message


def test_smoke_inputs_giving_nan(tmp_path):
    path = write(tmp_path, "nan", """
        class Model(nn.Module):
            def forward(self, x):
                return torch.log(x)
        """, GOOD_INPUTS, GOOD_INIT, """
        def get_smoke_inputs():
            return [-torch.ones(4, 4)]
        """)
    message = load_error(path, smoke=True)
    assert message.startswith(str(path)) and "NaN" in message and "smoke" in message
    # Without the smoke run the same file loads (shapes come from the meta device)
    assert load_problem(path, smoke=False).input_shapes == [(8, 16)]


def test_smoke_forward_raising(tmp_path):
    path = write(tmp_path, "smoke_raises", GOOD_MODEL, GOOD_INPUTS, GOOD_INIT, """
        def get_smoke_inputs():
            raise KeyError("oops")
        """)
    message = load_error(path)
    assert "get_smoke_inputs()" in message and "KeyError" in message


def test_unknown_library_name():
    message = load_error("no_such_problem_anywhere")
    assert message.startswith("no_such_problem_anywhere")
    assert "kernel-workbench problems" in message


def test_missing_file_path(tmp_path):
    path = tmp_path / "absent.py"
    message = load_error(path)
    assert message.startswith(str(path)) and "no such problem file" in message


def test_undecodable_file(tmp_path):
    path = tmp_path / "binary.py"
    path.write_bytes(b"\xff\xfe\x00bad")
    message = load_error(path)
    assert message.startswith(str(path)) and "cannot read" in message


# -- derived FLOPs and bytes -------------------------------------------------------------------

def test_kernelbench_file_gets_flops_and_bytes_from_shapes(tmp_path):
    path = tmp_path / "kb_matmul.py"
    path.write_text(textwrap.dedent('''
        """Plain matmul in KernelBench's format: no FAMILY, FLOPS or MIN_BYTES."""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, a, b):
                return torch.matmul(a, b)

        M, K, N = 256, 512, 128

        def get_inputs():
            return [torch.randn(M, K), torch.randn(K, N)]

        def get_init_inputs():
            return []
        ''').lstrip())
    p = load_problem(path)
    assert p.flops == 2 * 256 * 512 * 128
    assert p.min_bytes == (256 * 512 + 512 * 128 + 256 * 128) * 4
    assert p.input_shapes == [(256, 512), (512, 128)]
    assert p.output_shapes == [(256, 128)]
    assert (p.family, p.dtype, p.atol, p.rtol) == ("unknown", "float32", 1e-4, 1e-4)
    assert p.name == "kb_matmul" and p.path == path
    assert p.description == "Plain matmul in KernelBench's format: no FAMILY, FLOPS or MIN_BYTES."


def test_kernelbench_file_bytes_are_inputs_and_outputs(tmp_path):
    """Weights are not bytes that must move: a kernel may fold them when it is built
    (KernelBench level2 14 reduces a 137 GFLOP GEMM to a matrix-vector product)."""
    path = write(tmp_path, "kb_linear", """
        class Model(nn.Module):
            def __init__(self, k, n):
                super().__init__()
                self.fc = nn.Linear(k, n)

            def forward(self, x):
                return self.fc(x)

        def get_inputs():
            return [torch.randn(256, 512)]

        def get_init_inputs():
            return [512, 128]
        """)
    p = load_problem(path)
    assert p.flops == 2 * 256 * 512 * 128
    assert p.min_bytes == (256 * 512 + 256 * 128) * 4


def test_dtype_and_tolerance_follow_the_first_floating_input(tmp_path):
    path = write(tmp_path, "kb_half", GOOD_MODEL, GOOD_INIT, """
        def get_inputs():
            return [torch.randn(8, 16, dtype=torch.float16)]
        """)
    p = load_problem(path)
    assert (p.dtype, p.atol, p.rtol, p.input_dtypes) == ("float16", 1e-2, 1e-2, ["float16"])
    assert p.min_bytes == 2 * 8 * 16 * 2


def test_declared_values_win(tmp_path):
    path = write(tmp_path, "declared", "FAMILY = 'activation'\nDTYPE = 'float32'\n"
                 "FLOPS = 7\nMIN_BYTES = 9\nATOL = 0.5\nRTOL = 0.25\n",
                 GOOD_MODEL, GOOD_INPUTS, GOOD_INIT)
    p = load_problem(path)
    assert (p.family, p.flops, p.min_bytes, p.atol, p.rtol) == ("activation", 7, 9, 0.5, 0.25)


# -- the CLI ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def listing():
    return CliRunner().invoke(main, ["problems"])


def test_cli_lists_the_library(listing):
    assert listing.exit_code == 0, listing.output
    assert listing.stderr == ""
    lines = listing.stdout.splitlines()
    assert lines[0].split()[:6] == ["name", "family", "dtype", "GFLOP", "MB", "inputs"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert len(rows) >= 20
    for name in CRFM:
        row = rows[name]
        gflop, mb = row[3], row[4]
        assert float(gflop) > 0, row
        assert float(mb) > 0, row


def test_cli_lists_the_library_as_json():
    result = CliRunner().invoke(main, ["problems", "--json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)
    assert len(entries) >= 20
    by_name = {e["name"]: e for e in entries}
    assert set(CRFM) <= set(by_name)
    for e in entries:
        assert isinstance(e["flops"], int) and e["flops"] > 0, e["name"]
        assert isinstance(e["min_bytes"], int) and e["min_bytes"] > 0, e["name"]
        assert e["inputs"] and e["family"] != "unknown"
    assert by_name["matmul_fp32"]["family"] == "matmul"


def test_cli_bad_file_is_one_error_line_and_good_file_still_lists(tmp_path):
    good = write(tmp_path, "good", GOOD_MODEL, GOOD_INPUTS, GOOD_INIT)
    bad = write(tmp_path, "bad", GOOD_MODEL, """
        def get_inputs():
            raise RuntimeError("no\\ninputs\\ntoday")
        """, GOOD_INIT)
    result = CliRunner().invoke(main, ["problems", str(bad), str(good)])
    assert result.exit_code == 2
    err = result.stderr.splitlines()
    assert len(err) == 1, result.stderr
    assert err[0].startswith("error: ") and str(bad) in err[0] and "get_inputs()" in err[0]
    assert "Traceback" not in result.output
    rows = result.stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["good"]

    result = CliRunner().invoke(main, ["problems", "--json", str(good), str(bad)])
    assert result.exit_code == 2
    assert [e["name"] for e in json.loads(result.stdout)] == ["good"]
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"error: {bad}")


def test_cli_syntax_error_and_unknown_name(tmp_path):
    bad = write(tmp_path, "syntax", "def Model(:\n")
    result = CliRunner().invoke(main, ["problems", str(bad), "nonexistent_problem"])
    assert result.exit_code == 2
    err = result.stderr.splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
    assert err[0].startswith(f"error: {bad}:3: syntax error")
    assert "kernel-workbench problems" in err[1]
    assert result.stdout.splitlines()[1:] == []


def test_cli_good_files_exit_zero(tmp_path):
    good = write(tmp_path, "good", GOOD_MODEL, GOOD_INPUTS, GOOD_INIT)
    result = CliRunner().invoke(main, ["problems", "--json", str(good), "softmax"])
    assert result.exit_code == 0 and result.stderr == ""
    entries = json.loads(result.stdout)
    assert [e["name"] for e in entries] == ["good", "softmax"]
    assert entries[0]["flops"] is None or entries[0]["flops"] >= 0
    assert entries[0]["min_bytes"] == 2 * 8 * 16 * 4
