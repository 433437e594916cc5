"""Element-wise int8 chains folded into the int8 op producing their input as one table of its
output integers (fusion/attach.h, AttachTable): swish (LOGISTIC + MUL, EfficientNet's), HARD_SWISH,
LOGISTIC, TANH, LEAKY_RELU, a standalone RELU and a PRELU of one slope or of a slope per channel
(a table per channel) after int8 convolutions (every algorithm, split along K, in chunks),
depthwise convolutions, FULLY_CONNECTED and int8 ADD / MUL. The table is the chain's CPU
arithmetic tabulated, so each case is bit-exact against TFLite's int8 kernels, with fusion on and
off (option fuse_add), and launches that many fewer kernels."""

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
    # PyTorch's nn.PReLU(): one slope, however shaped; a slope per channel: a table per channel
    "prelu_one_slope": (
        lambda b, y: b.prelu(y, np.full((1, 1, b.shape(y)[-1]), 0.25, np.float32)),
        1,
    ),
    "prelu_scalar": (lambda b, y: b.prelu(y, np.array([-0.5], np.float32)), 1),
    "prelu_channels": (
        lambda b, y: b.prelu(y, np.linspace(-0.5, 0.5, b.shape(y)[-1], dtype=np.float32)),
        1,
    ),
    # ADD / SUB / MUL of a constant scalar, alone and chained: Keras's hard sigmoid after an int8
    # conversion (the + 3 and RELU6, then / 6), a Rescaling's scale and offset (either operand
    # order), and such ops after a unary op or per-channel slopes: one table for the chain.
    "mul_scalar": (lambda b, y: b.mul(y, 0.25), 1),
    "hard_sigmoid": (lambda b, y: b.mul(b.add(y, 3.0, activation="RELU6"), 1 / 6), 2),
    "rescaling": (lambda b, y: b.sub(np.array(0.5, np.float32), b.mul(y, 0.5)), 2),
    "hard_swish_then_scale": (lambda b, y: b.add(b.mul(b.hard_swish(y), 0.75), -0.25), 3),
    "prelu_channels_then_offset": (
        lambda b, y: b.add(b.prelu(y, np.linspace(-0.5, 0.5, b.shape(y)[-1], dtype=np.float32)),
                           0.5),
        2,
    ),
    # Slopes per pixel and channel: no table of the output's integers, a kernel of its own.
    "prelu_pixels": (
        lambda b, y: b.prelu(y, np.linspace(-0.5, 0.5, 2 * b.shape(y)[-1], dtype=np.float32)
                             .reshape(1, 2, b.shape(y)[-1])[:, :1].repeat(b.shape(y)[2], 1)
                             + np.arange(b.shape(y)[2], dtype=np.float32)[None, :, None] * 0.01),
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
    # The int8 ADD's own kernel (kernels/binary_int8.cl's QUANT_TABLE), where no conv takes it.
    "add": lambda b, x: b.add(x, b.tanh(x)),
    "mul": lambda b, x: b.mul(x, b.tanh(x)),
}


def _model(producer: str, chain: str, shape: tuple[int, ...] = (1, 9, 7, 8)) -> tuple[bytes, int]:
    b = ModelBuilder(seed=3)
    x = b.input("x", shape)
    f, n = CHAINS[chain]
    b.output(f(b, PRODUCERS[producer](b, x)))
    return quantize_model(b.build(), seed=1), n


CASES = [("conv3x3", c) for c in CHAINS] + [
    (p, c)
    for p in PRODUCERS
    if p != "conv3x3"
    for c in ("swish", "hard_swish", "logistic", "prelu_channels", "hard_sigmoid")
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


@pytest.mark.parametrize(
    "options",
    [{"conv_algorithm": "direct"}, {"conv_algorithm": "implicit_gemm", "gemm_splits": 3}, {}],
    ids=["direct", "split_k", "chunks"],
)
def test_tables_per_channel_in_every_conv_path(options: dict[str, Any], runtime: str) -> None:
    # A PRELU of a slope per channel after a 3x3 of 40 outputs. Chunks: weights of 40 x 9 x 40
    # bytes past a 4 KiB allocation split the convolution by output channels (the activations
    # fit, so the PRELU is claimed), each chunk applying its own channels' tables.
    chunks = not options
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 3, 4, 40))
    y = b.conv2d(x, b.rand((40, 3, 3, 40)), b.rand((40,)), padding="SAME")
    b.output(b.prelu(y, np.linspace(-0.6, 0.9, 40, dtype=np.float32)))
    model = quantize_model(b.build(), seed=2)
    check_folds(model, runtime, -1 if chunks else 1, **(options or {"max_alloc_bytes": 4096}))


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


def test_a_scalar_chain_stops_where_a_value_is_read_twice(runtime: str) -> None:
    # conv -> MUL(0.5) -> ADD(1) whose MUL output is also a model output: the MUL folds into the
    # conv (its output is read by the MUL alone), the ADD stays a kernel of its own.
    b = ModelBuilder(seed=4)
    y = PRODUCERS["conv1x1"](b, b.input("x", (1, 5, 5, 8)))
    m = b.mul(y, 0.5)
    b.output(b.add(m, 1.0))
    b.output(m)
    model = quantize_model(b.build(), seed=1)
    check_folds(model, runtime, 1)


@pytest.mark.parametrize("chain", ["rescaling", "prelu_channels", "hard_swish_then_scale"])
def test_a_chain_after_the_input_quantize_folds_into_it(runtime: str, chain: str) -> None:
    # A Keras Rescaling on an int8 model's input (QUANTIZE, MUL and ADD of scalars), slopes per
    # channel or a unary op then scalars, before a conv: the QUANTIZE of the float input stores
    # through the chain's table.
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 6, 6, 4))
    if chain == "rescaling":
        r, n = b.add(b.mul(x, 1 / 127.5), -1.0), 2
    else:
        f, n = CHAINS[chain]
        r = f(b, x)
    b.output(b.conv2d(r, b.rand((8, 3, 3, 4)), b.rand((8,)), padding="SAME"))
    model = quantize_model(b.build(), seed=2)
    check_folds(model, runtime, n)
