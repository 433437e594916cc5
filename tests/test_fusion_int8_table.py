"""Element-wise int8 chains folded into the int8 op producing their input as one table of its
output integers (fusion/attach.h, AttachTable): swish (LOGISTIC + MUL, EfficientNet's), HARD_SWISH,
LOGISTIC, TANH, LEAKY_RELU, a standalone RELU and a PRELU of one slope after int8 convolutions
(every algorithm, split along K, in chunks), depthwise convolutions and FULLY_CONNECTED. The
table is the chain's CPU arithmetic tabulated, so each case is bit-exact against TFLite's int8
kernels, with fusion on and off (option fuse_add), and launches that many fewer kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tflite
from folds import launches as _launches
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

B = tflite.BuiltinOperator


def check_folds(model: bytes, runtime: str, folded: int, **options: Any) -> None:
    """folded: the launches fewer with fusion (-1: fewer, by as many as the chunks ran)."""
    common = {"min_fraction": 1.0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse_add=False)
    if folded < 0:
        assert _launches(on) < _launches(off), on.delegate.profile().table()
    else:
        assert _launches(on) == _launches(off) - folded, on.delegate.profile().table()


def _unary(b: ModelBuilder, code: int, y: int) -> int:
    if code == B.LEAKY_RELU:
        return b._op(code, [y], [b.shape(y)], options="LeakyReluOptions", Alpha=0.1)[0]
    return b._op(code, [y], [b.shape(y)])[0]


# name -> (the chain after y, nodes it folds)
CHAINS: dict[str, tuple[Callable[[ModelBuilder, int], int], int]] = {
    "swish": (lambda b, y: b.mul(y, b.logistic(y)), 2),
    "swish_reversed": (lambda b, y: b.mul(b.logistic(y), y), 2),
    "hard_swish": (lambda b, y: b.hard_swish(y), 1),
    "logistic": (lambda b, y: b.logistic(y), 1),
    "tanh": (lambda b, y: b.tanh(y), 1),
    "leaky_relu": (lambda b, y: _unary(b, B.LEAKY_RELU, y), 1),
    "relu": (lambda b, y: b.relu(y), 1),
    # PyTorch's nn.PReLU(): one slope, however shaped; slopes that differ stay a kernel of their own
    "prelu_one_slope": (
        lambda b, y: b.prelu(y, np.full((1, 1, b.shape(y)[-1]), 0.25, np.float32)),
        1,
    ),
    "prelu_scalar": (lambda b, y: b.prelu(y, np.array([-0.5], np.float32)), 1),
    "prelu_channels": (
        lambda b, y: b.prelu(y, np.linspace(-0.5, 0.5, b.shape(y)[-1], dtype=np.float32)),
        0,
    ),
}
PRODUCERS: dict[str, Callable[[ModelBuilder, int], int]] = {
    "conv3x3": lambda b, x: b.conv2d(x, b.rand((12, 3, 3, 8)), b.rand((12,)), padding="SAME"),
    "conv1x1": lambda b, x: b.conv2d(x, b.rand((12, 1, 1, 8)), b.rand((12,))),
    "depthwise": lambda b, x: b.depthwise_conv2d(x, b.rand((1, 3, 3, 8)), b.rand((8,))),
    "fully_connected": lambda b, x: b.fully_connected(
        x, b.rand((12, 8)), b.rand((12,)), keep_num_dims=True
    ),
}


def _model(producer: str, chain: str, shape: tuple[int, ...] = (1, 9, 7, 8)) -> tuple[bytes, int]:
    b = ModelBuilder(seed=3)
    x = b.input("x", shape)
    f, n = CHAINS[chain]
    b.output(f(b, PRODUCERS[producer](b, x)))
    return quantize_model(b.build(), seed=1), n


CASES = [("conv3x3", c) for c in CHAINS] + [
    (p, c) for p in PRODUCERS if p != "conv3x3" for c in ("swish", "hard_swish", "logistic")
]


@pytest.mark.parametrize("producer,chain", CASES)
def test_int8_chain_folds_into_its_producer(producer: str, chain: str, runtime: str) -> None:
    model, n = _model(producer, chain)
    check_folds(model, runtime, n)


@pytest.mark.parametrize(
    "options",
    [
        {"conv_algorithm": "direct"},
        {"conv_algorithm": "implicit_gemm", "gemm_splits": 3},
        # The boundary QUANTIZE / DEQUANTIZE (and int8 MUL) cannot run in chunks: they stay on
        # the CPU; the chunked conv takes a HARD_SWISH table there.
        {"max_alloc_bytes": 1024, "expect_delegated": {"CONV_2D", "HARD_SWISH"}},
    ],
    ids=["direct", "split_k", "chunks"],
)
def test_table_in_every_conv_path(options: dict[str, Any], runtime: str) -> None:
    chunks = "max_alloc_bytes" in options
    if chunks:
        model, n = _model("conv3x3", "hard_swish", (1, 20, 16, 8))
    else:
        model, n = _model("conv3x3", "swish")
    check_folds(model, runtime, -1 if chunks else n, **options)


def test_swish_stays_when_the_logistic_is_read_elsewhere(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    y = PRODUCERS["conv1x1"](b, b.input("x", (1, 5, 5, 8)))
    s = b.logistic(y)
    b.output(b.mul(y, s))
    b.output(s)
    model = quantize_model(b.build(), seed=1)
    # LOGISTIC's output is a model output: only the standalone folds are off; nothing breaks.
    r = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True)
    assert _launches(r) >= 3, r.delegate.profile().table()
