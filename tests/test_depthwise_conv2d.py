"""DEPTHWISE_CONV_2D parity with stock TFLite CPU: depth multipliers 1-3, kernel sizes,
strides, dilations, paddings, odd sizes, activations, bias."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


class Depthwise(NamedTuple):
    input: tuple[int, int, int, int]  # N, H, W, C
    multiplier: int
    kernel: tuple[int, int]
    stride: int | tuple[int, int] = 1
    dilation: int | tuple[int, int] = 1
    padding: str = "SAME"
    activation: str | None = None
    bias: bool = True


CASES = {
    "3x3_batch2": Depthwise((2, 9, 11, 3), 1, (3, 3)),
    "3x3_s2_m2_relu6": Depthwise((1, 12, 10, 5), 2, (3, 3), stride=2, activation="RELU6"),
    "3x3_s3_m1": Depthwise((1, 11, 11, 9), 1, (3, 3), stride=3),
    "3x3_c33_aniso": Depthwise((1, 16, 15, 33), 1, (3, 3), stride=(1, 3), dilation=(2, 1)),
    "1x1_m3_valid": Depthwise((1, 7, 7, 1), 3, (1, 1), padding="VALID"),
    "1x1_s2_same": Depthwise((2, 9, 8, 6), 1, (1, 1), stride=2, activation="RELU"),
    "5x5_d2_m3_valid_nobias": Depthwise(
        (1, 13, 13, 7), 3, (5, 5), dilation=2, padding="VALID", activation="RELU", bias=False
    ),
    "5x5_s2_d2": Depthwise((1, 10, 10, 4), 1, (5, 5), stride=2, dilation=2),
    "7x7_s2_batch2_n1to1": Depthwise((2, 8, 9, 6), 1, (7, 7), stride=2, activation="RELU_N1_TO_1"),
    "7x7_valid_m2": Depthwise((1, 9, 12, 3), 2, (7, 7), padding="VALID", bias=False),
    "3x5_larger_than_input": Depthwise((1, 2, 3, 2), 2, (3, 5), activation="RELU6"),
    "3x3_c64": Depthwise((1, 9, 16, 64), 1, (3, 3), activation="RELU6"),
    "3x3_s2_c24_m2_batch2": Depthwise((2, 7, 8, 24), 2, (3, 3), stride=2),
}


def depthwise_model(case: Depthwise, seed: int = 0, fp16_weights: bool = False) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", case.input)
    kh, kw = case.kernel
    cm = case.input[3] * case.multiplier
    w = b.rand((1, kh, kw, cm), scale=math.sqrt(2.0 / (kh * kw)))
    bias = b.rand((cm,), scale=0.5) if case.bias else None
    b.output(
        b.depthwise_conv2d(
            x,
            w,
            bias,
            stride=case.stride,
            dilation=case.dilation,
            padding=case.padding,
            depth_multiplier=case.multiplier,
            activation=case.activation,
            fp16_weights=fp16_weights,
        )
    )
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_depthwise_conv2d_parity(case: Depthwise, runtime: str) -> None:
    check_parity(depthwise_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("activation", ["TANH", "SIGN_BIT"])
def test_depthwise_tanh_and_sign_bit_apply_nothing(activation: str, runtime: str) -> None:
    # As TFLite's float kernel: the whole float range, no activation.
    case = Depthwise((1, 8, 7, 5), 2, (3, 3), activation=activation)
    check_parity(depthwise_model(case), runtime, expect_delegated="all")


def test_depthwise_separable_block(runtime: str) -> None:
    # MobileNet's pattern: depthwise 3x3 + ReLU6, pointwise 1x1, one partition.
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 13, 11, 7))
    y = b.depthwise_conv2d(
        x, b.rand((1, 3, 3, 7), scale=math.sqrt(2 / 9)), b.rand((7,)), stride=2, activation="RELU6"
    )
    y = b.conv2d(y, b.rand((10, 1, 1, 7)), b.rand((10,)), activation="RELU6")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 20), scale=math.sqrt(2 / 9)), depth_multiplier=2)
    b.output(y)
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
