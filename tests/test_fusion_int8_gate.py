"""The int8 form of the gate fold (fusion/gate.cc): an int8 squeeze-and-excitation MUL folded into
the 1x1 int8 convolution reading it, whose GEMM computes each gated byte as the MUL's own kernel
does where it loads A (kernels/gemm_int8.cl's GATE_A). Bit-exact against TFLite's int8 kernels
with the pass on and off: either operand order, a gate of shape [C], channels not a multiple of 4,
K split across groups, a residual on the same convolution, two readers, the MUL's own activation,
repeated invokes; and what keeps its MUL (two images, a 3x3 reader, a MUL read elsewhere)."""

from __future__ import annotations

from typing import Any

import pytest
from folds import estimated_and_launched, folded_nodes, launches
from int8_parity import Int8Result, check_int8_parity
from test_fusion_gate import _gate, _se_block, two_readers

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

# Every pass but the gate (option fuse).
NO_GATE = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,ds_chain,depthwise,prelu,requantize,"
    "expand,pool,squeeze_tail,gathers,concat,dense_chain"
)


def _int8(model: bytes, seed: int = 1) -> bytes:
    return quantize_model(model, seed=seed)


def _both(model: bytes, runtime: str, gated: int, **options: Any) -> Int8Result:
    """Bit-exact with the gate pass on and off; on, `gated` convolutions took a gate and the
    invoke launched one kernel fewer per gate MUL."""
    common: dict[str, Any] = {"min_fraction": 1.0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, fuse=NO_GATE, **common)
    assert folded_nodes(on, "+GATE") == gated, on.delegate.profile().table()
    assert folded_nodes(off, "+GATE") == 0
    assert launches(on) == launches(off) - (1 if gated else 0), on.delegate.profile().table()
    return on


CASES = [
    ((1, 7, 7, 16), {}),
    ((1, 6, 5, 12), {"gate_first": True}),
    ((1, 5, 7, 8), {"gate_shape": (-1,)}),
    ((1, 6, 6, 6), {"out": 10}),  # K not a multiple of 4: A's bytes one at a time
    ((1, 7, 7, 16), {"out": 16, "residual": True}),
    ((1, 9, 9, 40), {"out": 24}),
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_the_int8_gate_runs_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], kw: Any
) -> None:
    _both(_int8(_se_block(shape, seed=sum(shape), **kw)), runtime, gated=1)


@pytest.mark.parametrize("splits", [2, 3])
def test_a_split_int8_gemm_gates_every_split(runtime: str, splits: int) -> None:
    on = _both(
        _int8(_se_block((1, 6, 6, 40), out=24, seed=splits)), runtime, gated=1, gemm_splits=splits
    )
    assert any("splitk" in k.kernel for k in on.delegate.profile().kernels)


@pytest.mark.parametrize("activation", ["RELU", "RELU6"])
def test_the_muls_own_activation_clamps_each_gated_byte(runtime: str, activation: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    g = b.mul(h, _gate(b, h, 8), activation)
    b.output(b.conv2d(g, b.rand((12, 1, 1, 8)), b.rand((12,), 0.2)))
    _both(_int8(b.build()), runtime, gated=1)


def test_two_int8_convolutions_reading_the_gated_value_both_take_the_gate(runtime: str) -> None:
    _both(_int8(two_readers()), runtime, gated=2)


@pytest.mark.parametrize("case", ["two_images", "3x3", "read_elsewhere"])
def test_what_keeps_its_int8_mul(runtime: str, case: str) -> None:
    b = ModelBuilder(seed=5)
    x = b.input("x", (2 if case == "two_images" else 1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), activation="RELU")
    g = b.mul(h, _gate(b, h, 8))
    k = 3 if case == "3x3" else 1
    b.output(b.conv2d(g, b.rand((12, k, k, 8)), b.rand((12,), 0.2), 1, 1, "SAME"))
    if case == "read_elsewhere":
        b.output(g)
    r = check_int8_parity(_int8(b.build()), runtime, min_fraction=1.0, profiling=True)
    assert folded_nodes(r, "+GATE") == 0
    assert any(k.op == "MUL" and k.shape.count("[") == 3 for k in r.delegate.profile().kernels), (
        r.delegate.profile().table()
    )


def test_the_cost_model_counts_the_folded_int8_launches(runtime: str) -> None:
    # int8 inputs and outputs: no QUANTIZE / DEQUANTIZE at the edges, which the cost model leaves
    # to the CPU.
    model = quantize_model(_se_block((1, 7, 7, 16), seed=7), seed=1, io="int8")
    counts, launched = estimated_and_launched(model, runtime)
    assert counts and counts[0] == launched


def test_repeated_invokes_read_each_invokes_int8_gate(runtime: str) -> None:
    m = _int8(_se_block((1, 7, 7, 16), residual=True, out=16, seed=8))
    for seed in (1, 2, 3):
        check_int8_parity(m, runtime, seed=seed, min_fraction=1.0)
