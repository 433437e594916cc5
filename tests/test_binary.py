"""Element-wise binary ops besides ADD (src_cpp/ops/binary.cc) against stock TFLite CPU: SUB, MUL,
DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, POW and PRELU; same shapes, NumPy broadcasting,
constant operands on either side, fused activations, fp16 storage, chunks, and the special values
(NaN, +-Inf) the CPU kernels keep."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from parity import CPU_OP, check_parity, cpu_op

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

Operand = int | np.ndarray
BUILD: dict[str, Callable[[ModelBuilder, Operand, Operand, str | None], int]] = {
    "SUB": lambda b, x, y, act: b.sub(x, y, act),
    "MUL": lambda b, x, y, act: b.mul(x, y, act),
    "DIV": lambda b, x, y, act: b.div(x, y, act),
    "MAXIMUM": lambda b, x, y, act: b.maximum(x, y),
    "MINIMUM": lambda b, x, y, act: b.minimum(x, y),
    "SQUARED_DIFFERENCE": lambda b, x, y, act: b.squared_difference(x, y),
    "POW": lambda b, x, y, act: b.pow(x, y),
    "PRELU": lambda b, x, y, act: b.prelu(x, y),
}
FUSED = {"SUB", "MUL", "DIV"}  # ops whose params carry a fused activation


class Case(NamedTuple):
    a: tuple[int, ...]
    b: tuple[int, ...]
    const_b: bool = False  # b is a constant (else a second graph input)
    const_first: bool = False  # the constant is the first operand


CASES = {
    "same_4d": Case((2, 5, 7, 3), (2, 5, 7, 3)),
    "same_odd_1d": Case((7,), (7,)),
    "channel_const": Case((1, 6, 5, 11), (11,), const_b=True),
    "channel_const_first": Case((1, 4, 6, 5), (1, 1, 5), const_b=True, const_first=True),
    "scalar_input": Case((3, 4), ()),
    "both_broadcast_4d": Case((1, 5, 1, 3), (2, 1, 7, 1)),
    "rank_2_vs_3": Case((4, 1), (3, 1, 6)),
    # Broadcasts that merge into three axes (binary_bcast3), 4 channels per work-item and not:
    # a squeeze-and-excitation scale per image at batch 3, a per-channel constant, a value per
    # pixel spread over its channels.
    "se_scale_batch": Case((3, 5, 4, 8), (3, 1, 1, 8)),
    "se_scale_odd_channels": Case((2, 3, 3, 5), (2, 1, 1, 5)),
    "channel_const_vec4": Case((2, 3, 5, 8), (8,), const_b=True),
    "pixel_over_channels": Case((2, 6, 8), (2, 6, 1)),
}


def _values(op: str, shape: tuple[int, ...], rng: np.random.Generator, second: bool) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    if op == "POW":  # a positive base; a small exponent keeps the result in range
        return (x * 0.7).astype(np.float32) if second else np.abs(x) + np.float32(0.2)
    if op == "DIV" and second:  # divisors away from zero
        return np.where(x < 0, x - 0.5, x + 0.5).astype(np.float32)
    return x


def binary_model(op: str, case: Case, act: str | None = None) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(7)
    b = ModelBuilder(seed=1)
    xa = b.input("a", case.a)
    inputs = [_values(op, case.a, rng, second=False)]
    if case.const_b:
        y: Operand = _values(op, case.b, rng, second=True)
    else:
        y = b.input("b", case.b)
        inputs.append(_values(op, case.b, rng, second=True))
    if case.const_first and op != "POW":
        b.output(BUILD[op](b, y, xa, act))
    else:
        b.output(BUILD[op](b, xa, y, act))
    return b.build(), inputs


# PRELU's alpha is a constant second operand in converted models.
PARITY = [
    pytest.param(op, case, id=f"{op}-{name}")
    for op in BUILD
    for name, case in CASES.items()
    if op != "PRELU" or (case.const_b and not case.const_first)
]


@pytest.mark.parametrize(("op", "case"), PARITY)
def test_binary_parity(op: str, case: Case, runtime: str) -> None:
    model, inputs = binary_model(op, case)
    check_parity(model, runtime, inputs, expect_delegated="all")


@pytest.mark.parametrize(
    ("op", "act"), [("SUB", "RELU"), ("MUL", "RELU6"), ("DIV", "RELU_N1_TO_1"), ("MUL", "RELU")]
)
def test_binary_fused_activation(op: str, act: str, runtime: str) -> None:
    model, inputs = binary_model(op, CASES["both_broadcast_4d"], act)
    check_parity(model, runtime, inputs, expect_delegated="all")


@pytest.mark.parametrize("op", ["SUB", "MUL"])
def test_binary_unsupported_activation_stays_on_cpu(op: str, runtime: str) -> None:
    model, inputs = binary_model(op, CASES["same_4d"], "TANH")
    r = check_parity(model, runtime, inputs, expect_cpu="all")
    assert "activation" in r.reason(0)


def test_prelu_with_per_pixel_alpha(runtime: str) -> None:
    # Keras PReLU without shared axes: alpha is [H, W, C].
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 5, 4))
    b.output(b.prelu(b.conv2d(x, b.rand((4, 3, 3, 4)), padding="SAME"), b.rand((6, 5, 4), 0.3)))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


@pytest.mark.parametrize("case", ["channel_const", "channel_const_vec4"])
@pytest.mark.parametrize("op", ["MUL", "DIV", "SQUARED_DIFFERENCE", "PRELU"])
def test_binary_fp16_storage(op: str, case: str, runtime: str) -> None:
    model, inputs = binary_model(op, CASES[case])
    check_parity(
        model, runtime, inputs, rtol=1e-2, atol=2e-2, expect_delegated="all", precision="fp16"
    )


def test_binary_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    # 3 KB buffers: the 8 KB operands are kept in pieces and the op runs in chunks.
    model, inputs = binary_model("MUL", Case((2, 16, 16, 4), (1, 16, 1, 4)))
    r = check_parity(model, runtime, inputs, expect_delegated="all", max_alloc_bytes=3072)
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_squeeze_excite_scale_and_swish_chain(runtime: str) -> None:
    # x * sigmoid(x) (swish) times a per-channel scale from a CPU op: mixes unary and binary ops
    # across a partition boundary.
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 8, 8, 6))
    y = b.conv2d(x, b.rand((6, 1, 1, 6)))
    swish = b.mul(y, b.logistic(y))
    scale = cpu_op(b, b.input("s", (1, 1, 1, 6)))
    b.output(b.sub(b.mul(swish, scale), b.rand((6,), 0.1), "RELU"))
    check_parity(b.build(), runtime, expect_cpu={CPU_OP}, expect_partitions=2)


def _special(shape: tuple[int, ...]) -> np.ndarray:
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    return x


def _run_special(model: bytes, runtime: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(delegate output, CPU reference) for one input; the delegate must claim every node."""
    outs = []
    delegate = clgpu_delegate.load()
    for delegates in (None, [delegate]):
        interp = make_interpreter(model, delegates, runtime=runtime, reference=True)
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        outs.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    assert all(d["delegated"] for d in delegate.decisions()), delegate.decisions()
    return outs[1], outs[0]


@pytest.mark.parametrize("act", [None, "RELU", "RELU6"])
@pytest.mark.parametrize("op", ["ADD", "MUL", "SUB", "CONV_1X1"])
def test_nan_is_kept_and_inf_clamped_like_the_cpu(op: str, act: str | None, runtime: str) -> None:
    # TFLite's kernels clamp to [-FLT_MAX, FLT_MAX] when there is no activation and keep NaN
    # through every clamp.
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 5, 6, 3))
    if op == "CONV_1X1":
        b.output(b.conv2d(x, b.rand((4, 1, 1, 3)), activation=act))
    else:
        build = BUILD.get(op, lambda b, x, y, act: b.add(x, y, act))
        b.output(build(b, x, b.rand((3,), 1.0), act))
    got, ref = _run_special(b.build(), runtime, _special((2, 5, 6, 3)))
    assert np.isnan(ref).any()
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN positions differ"
    fin = ~np.isnan(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-5)
