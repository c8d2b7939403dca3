"""nn.Linear 4096->4096 (with bias) followed by exact GELU on a (4096, 4096) fp32 batch."""
import torch
import torch.nn as nn

FAMILY = "fused"
DTYPE = "float32"
BATCH, IN_FEATURES, OUT_FEATURES = 4096, 4096, 4096
OUT_ELEMS = BATCH * OUT_FEATURES
FLOPS = 2 * BATCH * IN_FEATURES * OUT_FEATURES + OUT_ELEMS + 5 * OUT_ELEMS  # GEMM, bias add, GELU
PARAMS = OUT_FEATURES * IN_FEATURES + OUT_FEATURES
MIN_BYTES = 4 * (BATCH * IN_FEATURES + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]


def get_smoke_inputs():
    return [torch.randn(4, IN_FEATURES)]
