"""DEPTHWISE_CONV_2D on int8 tensors against TFLite's int8 kernels, bit for bit: channel counts
around the 8-channel NEON loop whose rounding LiteRT's CPU kernel uses, depth multipliers,
padding, strides, dilations, fused activations, per-channel and per-tensor weights."""

from __future__ import annotations

import math

import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # input (N, H, W, C), (KH, KW), depth multiplier, stride, dilation, padding, activation
    ((1, 9, 11, 19), (3, 3), 1, 1, 1, "SAME", None),
    ((1, 12, 12, 8), (3, 3), 1, 2, 1, "SAME", "RELU6"),
    ((2, 7, 6, 3), (5, 5), 2, 1, 1, "VALID", "RELU"),
    ((1, 10, 10, 24), (3, 3), 1, (2, 1), (1, 2), "SAME", "RELU_N1_TO_1"),
    ((1, 6, 6, 33), (1, 1), 1, 1, 1, "VALID", None),
    ((1, 14, 14, 16), (7, 7), 1, 1, 1, "SAME", "RELU6"),
]


def dw_model(case, per_channel: bool, seed: int, pow2_scales: bool = False) -> bytes:
    shape, (kh, kw), mult, stride, dilation, padding, act = case
    c = shape[3] * mult
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    y = b.depthwise_conv2d(
        x,
        b.rand((1, kh, kw, c), math.sqrt(2 / (kh * kw))),
        b.rand((c,), 0.3),
        stride=stride,
        dilation=dilation,
        padding=padding,
        depth_multiplier=mult,
        activation=act,
    )
    b.output(y)
    return quantize_model(
        b.build(),
        per_channel=per_channel,
        io="int8",
        seed=seed,
        jitter=0.4,
        pow2_scales=pow2_scales,
    )


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("per_channel", [True, False])
def test_depthwise_conv2d_int8(runtime: str, case, per_channel: bool) -> None:
    check_int8_parity(dw_model(case, per_channel, seed=case[0][3]), runtime)


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[4]])
def test_depthwise_conv2d_int8_ties(runtime: str, case) -> None:
    # Power-of-two scales: exact ties in every requantization's final shift, rounded as each
    # runtime's output loop does (scalar away from zero; LiteRT's NEON loop up, 8 channels at a
    # time).
    check_int8_parity(dw_model(case, True, seed=13, pow2_scales=True), runtime, min_fraction=1.0)
