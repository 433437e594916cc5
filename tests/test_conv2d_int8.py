"""CONV_2D on int8 tensors against TFLite's int8 kernels, bit for bit: per-tensor and per-channel
weights, odd channel counts (the packed and the byte-wise im2col), padding, strides, dilations,
fused activations, every algorithm with an exact integer result, and a conv run in chunks."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # input (N, H, W, C), filters (OC, KH, KW), stride, dilation, padding, activation
    ((1, 9, 11, 5), (7, 3, 3), 1, 1, "SAME", None),
    ((1, 12, 12, 8), (16, 3, 3), 2, 1, "SAME", "RELU6"),
    ((2, 7, 6, 3), (5, 5, 5), 1, 1, "VALID", "RELU"),
    ((1, 10, 10, 4), (6, 3, 2), (2, 1), (1, 2), "SAME", "RELU_N1_TO_1"),
    ((1, 8, 8, 12), (33, 1, 1), 1, 1, "VALID", None),
    ((1, 6, 9, 17), (9, 1, 1), 2, 1, "SAME", "RELU"),
    ((1, 15, 13, 1), (3, 7, 7), 3, 1, "SAME", None),
    ((1, 4, 4, 64), (65, 3, 3), 1, 2, "SAME", "RELU6"),
]


def conv_model(
    case, per_channel: bool, seed: int, io: str = "int8", pow2_scales: bool = False
) -> bytes:
    shape, (oc, kh, kw), stride, dilation, padding, act = case
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    y = b.conv2d(
        x,
        b.rand((oc, kh, kw, shape[3])),
        b.rand((oc,), 0.3),
        stride=stride,
        dilation=dilation,
        padding=padding,
        activation=act,
    )
    b.output(y)
    return quantize_model(
        b.build(), per_channel=per_channel, io=io, seed=seed, jitter=0.4, pow2_scales=pow2_scales
    )


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("per_channel", [True, False])
def test_conv2d_int8(runtime: str, case, per_channel: bool) -> None:
    check_int8_parity(conv_model(case, per_channel, seed=len(case[0]) + case[1][0]), runtime)


@pytest.mark.parametrize("algorithm", ["direct", "implicit_gemm", "gemm"])
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[4]])
def test_conv2d_int8_algorithms(runtime: str, case, algorithm: str) -> None:
    check_int8_parity(conv_model(case, True, seed=3), runtime, conv_algorithm=algorithm)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_conv2d_int8_float_io_is_one_partition(runtime: str, precision: str) -> None:
    # QUANTIZE -> CONV_2D -> DEQUANTIZE: one partition, the float ends kept float32 under fp16.
    model = conv_model(CASES[1], True, seed=5, io="float")
    check_int8_parity(model, runtime, expect_partitions=1, precision=precision)


@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[7]])
def test_conv2d_int8_ties(runtime: str, case) -> None:
    # Power-of-two scales: exact ties in every requantization's final shift (ruy rounds them up).
    model = conv_model(case, True, seed=11, pow2_scales=True)
    check_int8_parity(model, runtime, min_fraction=1.0)


@pytest.mark.parametrize("algorithm", ["auto", "direct", "implicit_gemm"])
@pytest.mark.parametrize("geometry", [(3, 1, 24), (1, 1, 40), (5, 2, 9)])
def test_conv2d_int8_in_chunks(runtime: str, algorithm: str, geometry) -> None:
    # A largest allocation of 1 KiB: the 4 KiB input lives in pieces, the conv runs in chunks of
    # the output, output channels first where a chunk's weights would not fit.
    k, stride, oc = geometry
    b = ModelBuilder(seed=k)
    x = b.input("x", (1, 16, 16, 16))
    b.output(b.conv2d(x, b.rand((oc, k, k, 16)), b.rand((oc,), 0.2), stride, 1, "SAME", "RELU6"))
    model = quantize_model(b.build(), io="int8", seed=3, pow2_scales=True)
    r = check_int8_parity(
        model, runtime, min_fraction=1.0, max_alloc_bytes=1024, conv_algorithm=algorithm
    )
    assert "chunks" in r.decisions[0]["note"]
