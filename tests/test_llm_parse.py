"""Reading ideas and code out of model answers, prompts and prices."""
from __future__ import annotations

import pytest

from workbench.llm.parse import extract_code, guess_kind, normalize_kind, parse_ideas
from workbench.llm.prices import PriceError, PriceTable
from workbench.llm.prompts import PromptError, Prompts

MODEL = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def test_code_from_the_block_that_defines_modelnew():
    text = (f"First the reference:\n```python\nclass Model(nn.Module):\n    pass\n```\n"
            f"Then a CUDA file:\n```cuda\n__global__ void k() {{}}\n```\nAnswer:\n"
            f"```python\n{MODEL}```\nThat's it.")
    assert extract_code(text) == MODEL


def test_code_takes_the_last_of_several_solutions():
    text = f"```python\n{MODEL}```\nBetter:\n```py\n{MODEL}# v2\n```"
    assert extract_code(text).endswith("# v2\n")


def test_code_without_fences_drops_prose_around_it():
    text = ("Here is my solution, it uses shared memory.\n\n" + MODEL.replace(
        "pass", 'src = """\n__global__ void k(float* x) {\n}\n"""') +
            "\nThis should be about 2x faster: it avoids a pass.\n")
    code = extract_code(text)
    assert code.startswith("import torch") and "__global__" in code
    assert "faster" not in code and "Here is" not in code


def test_code_with_an_unclosed_fence():
    assert extract_code(f"```python\n{MODEL}") == MODEL


def test_no_code_is_none():
    assert extract_code("I cannot help with that.") is None
    assert extract_code("```python\nprint('no model')\n```") is None
    assert extract_code("") is None


def test_ideas_from_json_with_prose_and_fences():
    text = ('Here you go:\n```json\n[{"kind": "Memory access", "idea": "Vectorize loads."},\n'
            '{"category": "latency hiding", "description": "Double-buffer tiles."},\n'
            '"Unroll the reduction loop."]\n```')
    ideas = parse_ideas(text)
    assert [(i.text, i.kind) for i in ideas] == [
        ("Vectorize loads.", "memory"), ("Double-buffer tiles.", "asynchrony"),
        ("Unroll the reduction loop.", "control_flow")]


def test_ideas_from_an_object_holding_a_list():
    ideas = parse_ideas('{"ideas": [{"kind": "precision", "idea": "Use TF32 tensor cores"}]}')
    assert [(i.text, i.kind) for i in ideas] == [("Use TF32 tensor cores", "precision")]


def test_ideas_from_numbered_and_bulleted_lists():
    text = ("Ideas:\n1. **[parallelism]** One warp per row,\n   with shuffles for the sum.\n"
            "2) (memory) Keep the row in shared memory.\n"
            "- Compute: use __expf instead of expf.\n* Something about loops unrolling\n")
    ideas = parse_ideas(text)
    assert [i.kind for i in ideas] == ["parallelism", "memory", "compute", "control_flow"]
    assert ideas[0].text == "One warp per row, with shuffles for the sum."


def test_ideas_deduplicated_and_limited():
    text = "1. Use float4 loads.\n2. use float4 loads\n3. Unroll.\n4. Tile.\n"
    assert [i.text for i in parse_ideas(text, limit=2)] == ["Use float4 loads.", "Unroll."]


def test_no_ideas_is_empty():
    assert parse_ideas("Sorry, I have no suggestions.") == []
    assert parse_ideas("") == []


def test_kinds():
    assert normalize_kind("Data type / precision") == "precision"
    assert normalize_kind("occupancy") == "parallelism"
    assert normalize_kind("nonsense") is None
    assert guess_kind("double buffering with cp.async to hide latency") == "asynchrony"
    assert guess_kind("make it better") is None


def test_prompt_override_directory(tmp_path):
    (tmp_path / "ideate.md").write_text("Give $n ideas for $problem_name, costs $$5.")
    prompts = Prompts(tmp_path)
    assert prompts.render("ideate", n=3, problem_name="relu") == "Give 3 ideas for relu, costs $5.\n"
    assert "KernelBench-format" in prompts.render("conventions", dtype="float32")
    (tmp_path / "repair.md").write_text("Fix $nothing")
    with pytest.raises(PromptError, match=r"unknown placeholder \$nothing"):
        prompts.render("repair", source="x")
    with pytest.raises(PromptError, match="no such prompt directory"):
        Prompts(tmp_path / "missing")


def test_user_config_prompts_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "kernel-workbench" / "prompts").mkdir(parents=True)
    (tmp_path / "kernel-workbench" / "prompts" / "system.md").write_text("Be terse.")
    assert Prompts().render("system") == "Be terse.\n"


def test_prices_override_and_prefix_match(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('[o3]\ninput = 1.0\noutput = 4.0\n\n["my-local"]\ninput = 0\noutput = 0\n')
    table = PriceTable.load(path)
    assert table.lookup("o3-2025-04-16") == (1.0, 4.0)
    assert table.lookup("o3-pro") == PriceTable.load(path).prices["o3-pro"]
    assert table.cost("my-local", 1000, 1000) == 0.0
    assert table.cost("unknown-model", 10, 10) is None
    assert table.cost("o3", None, 10) is None
    path.write_text("[o3]\ninput = 'cheap'\n")
    with pytest.raises(PriceError, match="numeric"):
        PriceTable.load(path)


def test_a_code_block_after_the_list_is_not_part_of_the_last_idea():
    text = ("1. Tile the rows in shared memory.\n2. Use warp shuffles for the sum.\n\n"
            "For example:\n```cuda\n    float v = __shfl_down_sync(0xffffffff, x, 16);\n"
            "    out[i] = v;\n```\n   trailing indented prose\n")
    ideas = parse_ideas(text)
    assert [i.text for i in ideas] == ["Tile the rows in shared memory.",
                                       "Use warp shuffles for the sum."]


def test_json_ideas_followed_by_code_with_brackets():
    text = ('```json\n[{"kind": "memory", "idea": "Vectorize loads."}]\n```\nSketch:\n'
            '```cuda\n__global__ void k(float* a) { a[0] = a[1]; }\n```')
    assert [i.text for i in parse_ideas(text)] == ["Vectorize loads."]
