"""ADD parity with stock TFLite CPU: same shape, scalar, NumPy broadcasting up to 6 dims,
constant operands, fused activations."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


class Add(NamedTuple):
    a: tuple[int, ...]
    b: tuple[int, ...]
    activation: str | None = None
    const_b: bool = False  # b is a constant tensor (else a second graph input)
    const_first: bool = False  # the constant is the first operand


CASES = {
    "same_4d": Add((2, 9, 11, 3), (2, 9, 11, 3)),
    "same_odd_1d": Add((7,), (7,), "RELU"),  # tail of the 4-wide vector path
    "same_2d_relu6": Add((5, 13), (5, 13), "RELU6"),
    "same_const": Add((1, 6, 5, 3), (1, 6, 5, 3), "RELU_N1_TO_1", const_b=True),
    "scalar_const": Add((2, 5, 7, 3), (), const_b=True),
    "scalar_const_first": Add((2, 5, 7, 3), (), "RELU", const_b=True, const_first=True),
    "scalar_input": Add((3, 4), ()),
    "size1_4d": Add((2, 3, 4, 5), (1, 1, 1, 1), "RELU6"),
    "channel_bias": Add((2, 5, 7, 3), (3,), const_b=True),
    "channel_bias_input": Add((1, 4, 6, 11), (11,), "RELU"),
    "row": Add((2, 5, 7, 3), (1, 5, 1, 3)),
    "both_broadcast_4d": Add((1, 5, 1, 3), (2, 1, 7, 1), "RELU_N1_TO_1"),
    "rank_2_vs_3": Add((4, 1), (3, 1, 6)),
    "rank_1_vs_3_const_first": Add((3, 4, 5), (5,), const_b=True, const_first=True),
    "both_broadcast_5d": Add((2, 1, 4, 1, 3), (1, 3, 1, 5, 1), "RELU"),
    "both_broadcast_6d": Add((2, 1, 3, 1, 2, 3), (1, 2, 1, 4, 1, 3)),
    "6d_vs_1d": Add((1, 2, 3, 2, 2, 5), (5,), "RELU6", const_b=True),
}


def add_model(case: Add, seed: int = 0) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("a", case.a)
    y = b.rand(case.b, scale=1.0) if case.const_b else b.input("b", case.b)
    b.output(b.add(y, x, case.activation) if case.const_first else b.add(x, y, case.activation))
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_add_parity(case: Add, runtime: str) -> None:
    check_parity(add_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("activation", ["TANH", "SIGN_BIT"])
def test_add_unsupported_activation_stays_on_cpu(activation: str, runtime: str) -> None:
    r = check_parity(add_model(Add((2, 4, 5), (2, 4, 5), activation)), runtime, expect_cpu="all")
    assert "activation" in r.reason(0)


def test_int32_add_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    b.output(b.add(b.input("a", (2, 3), "int32"), b.input("b", (2, 3), "int32")))
    r = check_parity(b.build(), runtime, expect_cpu="all")
    assert "float32" in r.reason(0)


def test_add_same_tensor_twice(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (3, 5, 7))
    b.output(b.add(x, x, "RELU"))
    check_parity(b.build(), runtime, expect_delegated="all")


def test_add_residual_chain(runtime: str) -> None:
    # conv -> add(conv output, input) -> add(bias) in one partition, two graph outputs.
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 7, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)))
    s = b.add(y, x, "RELU")
    t = b.add(s, np.linspace(-1, 1, 4, dtype=np.float32))
    b.output(s)
    b.output(t)
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
