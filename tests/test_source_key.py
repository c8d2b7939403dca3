"""The normalised-source key: comments and layout out, code and string contents kept."""
from __future__ import annotations

from workbench.source_key import normalize, source_key

BASE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>
#define BLOCK 256

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

RESTYLED = """# A comment the model added.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline   # builds the extension

cuda_src = '''
// ReLU, one thread per element
#include <torch/extension.h>
#define BLOCK 256
/* block size above */
__global__ void relu_kernel(const float *x,float *y,int n)
{
  int i = blockIdx.x*blockDim.x + threadIdx.x;   // global index
  if (i<n) y[i] = x[i]>0.f ? x[i] : 0.f;
}
'''


class ModelNew(nn.Module):
  \"\"\"The fused ReLU.\"\"\"

  def forward(self, x):
      # Same as the reference.
      return torch.relu( x )
"""


def test_comments_docstrings_and_layout_do_not_change_the_key():
    assert normalize(BASE) == normalize(RESTYLED)
    assert source_key(BASE) == source_key(RESTYLED)
    assert "relu_kernel" in normalize(BASE) and "comment" not in normalize(RESTYLED)


def test_code_changes_change_the_key():
    variants = [BASE.replace("BLOCK 256", "BLOCK 512"),
                BASE.replace("0.f ? x[i]", "0.f ? 2*x[i]"),
                BASE.replace("torch.relu(x)", "torch.relu(x + 0)"),
                BASE.replace("int i =", "unsigned i =")]
    keys = {source_key(v) for v in variants}
    assert len(keys) == len(variants) and source_key(BASE) not in keys


def test_comment_markers_inside_literals_are_content():
    a = BASE.replace("int n) {", 'int n) { printf("// kept /* too */");')
    b = BASE.replace("int n) {", 'int n) { printf("");')
    assert source_key(a) != source_key(b)
    assert "// kept /* too */" in normalize(a)
    assert source_key('x = "a # b"\n') != source_key('x = "a"\n')


def test_string_contents_keep_all_but_whitespace_runs():
    assert source_key('msg = "hello   world"\n') == source_key("msg = 'hello world'\n")
    assert source_key('msg = "hello world"\n') != source_key('msg = "helloworld"\n')


def test_whitespace_that_separates_tokens_is_kept():
    c = 'src = "int f(int a, int b) { return a - -b; }"\n'
    assert source_key(c) != source_key(c.replace("a - -b", "a--b"))
    assert source_key(c) != source_key(c.replace("int a", "inta"))
    # A preprocessor line ends at its newline: joining the next line onto it is other code.
    d = 'src = "#include <x.h>\\n#define A 1\\nint x;"\n'
    assert source_key(d) != source_key(d.replace("1\\nint", "1 int"))


def test_escaped_newlines_equal_real_ones():
    escaped = 'src = "#define A 1\\nint x;  // note\\n"\n'
    real = 'src = """#define A 1\nint x;\n"""\n'
    assert source_key(escaped) == source_key(real)


def test_fstrings_and_bytes_are_kept():
    assert source_key('x = f"{n}  items"\n') == source_key("x = f'{n} items'\n")
    assert source_key('x = f"{n} items"\n') != source_key('x = f"{m} items"\n')
    assert source_key('x = b"ab"\n') != source_key('x = "ab"\n')


def test_source_python_cannot_read_still_gets_a_key():
    broken = "def f(:\n    return 1  # oops\n    '''"
    assert normalize(broken)
    assert source_key(broken) == source_key(broken + "\n\n")
    assert len(source_key(broken)) == 64
