"""TRANSPOSE_CONV on int8 tensors against TFLite's TransposeConvV2, bit for bit: strides 1-3,
SAME and VALID, per-channel and per-tensor weights, fused activations, output channels around
LiteRT's 8-wide NEON requantization loop, an output shape computed from SHAPE (folded), and
power-of-two scales (every final shift a tie)."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # input, output channels, kernel, stride, padding, activation, shape from SHAPE
    ((1, 5, 6, 7), 11, 3, 2, "SAME", None, False),
    ((2, 4, 4, 16), 16, 2, 2, "VALID", "RELU", False),
    ((1, 3, 5, 3), 13, 4, 3, "SAME", None, True),
    ((1, 7, 7, 8), 9, 3, 1, "SAME", "RELU6", False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-s{c[3]}-{c[4]}")
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("pow2", [False, True])
def test_transpose_conv_int8(runtime: str, case, per_channel: bool, pow2: bool) -> None:
    shape, oc, k, s, pad, act, dynamic = case
    _, h, w, c = shape
    oh, ow = (h * s, w * s) if pad == "SAME" else ((h - 1) * s + k, (w - 1) * s + k)
    b = ModelBuilder(seed=oc)
    x = b.input("x", shape)
    y = b.transpose_conv(
        x, b.rand((oc, k, k, c)), (oh, ow), s, pad, b.rand((oc,), 0.3), act, dynamic_batch=dynamic
    )
    b.output(y)
    model = quantize_model(
        b.build(), io="int8", seed=oc, jitter=0.3, pow2_scales=pow2, per_channel=per_channel
    )
    check_int8_parity(model, runtime, min_fraction=1.0, expect_partitions=1)
