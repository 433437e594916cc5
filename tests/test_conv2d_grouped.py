"""Grouped CONV_2D (filters of fewer input channels than the input: RegNet, ResNeXt, ShuffleNet,
what PyTorch's `groups` converts to) against stock TFLite CPU; the cases it declines, and the
folds that must not take a grouped convolution for a plain one."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytest
from parity import CONV_ALGORITHMS, check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Grouped(NamedTuple):
    input: tuple[int, int, int, int]  # N, H, W, C
    out_channels: int
    group_channels: int  # the filter's input channels
    kernel: tuple[int, int] = (3, 3)
    stride: int = 1
    dilation: int = 1
    padding: str = "SAME"
    activation: str | None = None


CASES = {
    "g2_3x3": Grouped((1, 9, 11, 8), 6, 4),
    # RegNet's: groups of 8 channels, stride 2 at a stage's start, a ReLU fused.
    "regnet_g8_s2_relu": Grouped((1, 14, 13, 48), 48, 8, stride=2, activation="RELU"),
    "g4_1x1_batch2": Grouped((2, 5, 7, 12), 16, 3, kernel=(1, 1), padding="VALID"),
    # One input channel per group, two outputs each: a depthwise with multiplier 2 as CONV_2D.
    "one_channel_groups": Grouped((1, 8, 8, 5), 10, 1),
    "g3_5x5_d2_valid_relu6": Grouped(
        (1, 15, 14, 9), 6, 3, kernel=(5, 5), dilation=2, padding="VALID", activation="RELU6"
    ),
}


def grouped_model(case: Grouped, seed: int = 0, fp16_weights: bool = False) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", case.input)
    kh, kw = case.kernel
    w = b.rand(
        (case.out_channels, kh, kw, case.group_channels),
        scale=math.sqrt(2.0 / (kh * kw * case.group_channels)),
    )
    y = b.conv2d(
        x,
        w,
        b.rand((case.out_channels,), scale=0.5),
        stride=case.stride,
        dilation=case.dilation,
        padding=case.padding,
        activation=case.activation,
        fp16_weights=fp16_weights,
    )
    b.output(y)
    return b.build()


def test_grouped_reference_is_per_group_numpy() -> None:
    # The reference itself: TFLite's CPU output equals numpy's convolution of each group alone
    # (so the parity below compares against a grouped convolution, not a misread one).
    rng = np.random.default_rng(1)
    w = rng.standard_normal((6, 3, 3, 4)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    b = ModelBuilder(seed=0)
    b.output(b.conv2d(b.input("x", (1, 9, 11, 8)), w, bias))
    ref = make_interpreter(b.build(), None, reference=True)
    ref.allocate_tensors()
    x = rng.standard_normal((1, 9, 11, 8)).astype(np.float32)
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    got = ref.get_tensor(ref.get_output_details()[0]["index"])
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros(got.shape, np.float32) + bias
    for o in range(6):
        c0 = (o // 3) * 4  # two groups of 4 channels, 3 filters each
        for ky in range(3):
            for kx in range(3):
                want[..., o] += xp[:, ky : ky + 9, kx : kx + 11, c0 : c0 + 4] @ w[o, ky, kx]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_grouped_conv2d_parity(case: Grouped, runtime: str) -> None:
    r = check_parity(grouped_model(case), runtime, expect_delegated="all", profiling=True)
    assert [k.kernel for k in r.delegate.profile().kernels] == ["conv2d_direct"]


@pytest.mark.parametrize("algorithm", [a for a in CONV_ALGORITHMS if a])
def test_a_forced_algorithm_that_cannot_group_falls_back_to_direct(
    algorithm: str, runtime: str
) -> None:
    check_parity(
        grouped_model(CASES["regnet_g8_s2_relu"]),
        runtime,
        expect_delegated="all",
        conv_algorithm=algorithm,
    )


def test_grouped_fp16_weights(runtime: str) -> None:
    check_parity(grouped_model(CASES["g2_3x3"], fp16_weights=True), runtime, expect_delegated="all")


def test_grouped_block_with_residual_and_depthwise_neighbours(runtime: str) -> None:
    # A depthwise before a grouped 1x1 (no depthwise fold: the GEMM reads every channel), and
    # a grouped 3x3 whose ADD may fold (the direct algorithm adds a residual).
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 10, 12, 16))
    d = b.depthwise_conv2d(x, b.rand((1, 3, 3, 16)), b.rand((16,)))
    p = b.conv2d(d, b.rand((16, 1, 1, 4)), b.rand((16,)))
    g = b.conv2d(p, b.rand((16, 3, 3, 8)), b.rand((16,)))
    b.output(b.relu(b.add(g, x)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    algorithms = [k.algorithm for k in r.delegate.profile().kernels if k.op == "CONV_2D"]
    assert not any("DEPTHWISE" in a for a in algorithms), algorithms


def test_grouped_conv_partitions_as_one(runtime: str) -> None:
    # A RegNet block (1x1, grouped 3x3, squeeze-excite, 1x1, residual) runs as one partition.
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 12, 12, 24))
    y = b.conv2d(x, b.rand((24, 1, 1, 24), scale=0.3), activation="RELU")
    y = b.conv2d(y, b.rand((24, 3, 3, 8), scale=0.3), activation="RELU")
    s = b.mean(y, [1, 2], keep_dims=True)
    s = b.conv2d(s, b.rand((6, 1, 1, 24)), activation="RELU")
    s = b.logistic(b.conv2d(s, b.rand((24, 1, 1, 6))))
    y = b.mul(y, s)
    y = b.conv2d(y, b.rand((24, 1, 1, 24), scale=0.3))
    b.output(b.relu(b.add(y, x)))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def _declined(model: bytes) -> list[str]:
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d])
    it.allocate_tensors()
    assert d.delegated_nodes() == []
    return [x["reason"] for x in d.decisions() if not x["delegated"]]


def test_a_nonfinite_grouped_weight_is_declined() -> None:
    # The CPU multiplies the padded border's zeros by it (NaN there); the direct kernel skips
    # those taps: left to the CPU, with the reason.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 6, 4))
    w = b.rand((4, 3, 3, 2))
    w[1, 0, 0, 1] = np.nan
    b.output(b.conv2d(x, w))
    assert any("non-finite" in r for r in _declined(b.build()))


def test_filters_that_do_not_divide_the_groups_are_declined() -> None:
    # 6 input channels in groups of 4: TFLite refuses it at Prepare; the model builder too.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 6, 6))
    with pytest.raises(ValueError, match="groups"):
        b.conv2d(x, b.rand((4, 3, 3, 4)))
