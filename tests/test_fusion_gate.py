"""A squeeze-and-excitation gate's MUL folded into the 1x1 convolution reading it
(fusion/gate.cc, AttachGate): the plain GEMM reads the MUL's input and scales the filter's tile
by the gate where it loads it (kernels/gemm_tiles.cl's K_SCALE), so the MUL runs no kernel.
MobileNetV3's and EfficientNet's blocks are the shape. Against TFLite's CPU kernels with the
pass on and off: either operand order, a gate of shape [C], channels not a multiple of 4, K split
across groups, a residual and PRELU slopes on the same convolution, two readers, fp16 storage;
and what must stay (an activation on the MUL, two images, a constant vector, a reader the GEMM
does not run, a MUL read elsewhere)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, pass_on_and_off
from parity import ParityResult, check_parity

from clgpu_delegate.modelgen import ModelBuilder

NO_GATE = "affine,pad,clamp,epilogue,residual,views,squeeze,depthwise,prelu,expand"  # all but gate


def _both(model: bytes, runtime: str, folded: int, **options: Any) -> ParityResult:
    """Parity with the pass on and off; on, `folded` MUL nodes ran no kernel of their own and the
    invoke launched as many kernels fewer."""
    return pass_on_and_off(model, runtime, NO_GATE, "MUL", "+GATE", folded, **options)


def _gate(b: ModelBuilder, h: int, c: int, shape: tuple[int, ...] = (1, 1, 1, -1)) -> int:
    """MobileNetV3's gate of h: MEAN, conv RELU, conv RELU6 (the + 3 in its bias), MUL by 1/6."""
    m = b.mean(h, [1, 2], keep_dims=True)
    s = b.conv2d(
        m, b.rand((max(c // 4, 2), 1, 1, c)), b.rand((max(c // 4, 2),), 0.2), 1, 1, "VALID", "RELU"
    )
    s = b.conv2d(
        s, b.rand((c, 1, 1, max(c // 4, 2))), b.rand((c,), 1.0) + 3.0, 1, 1, "VALID", "RELU6"
    )
    s = b.mul(s, np.array(1 / 6, np.float32))
    return s if shape == (1, 1, 1, -1) else b.reshape(s, tuple(c if d < 0 else d for d in shape))


def _se_block(
    shape: tuple[int, int, int, int],
    *,
    out: int = 12,
    gate_first: bool = False,
    gate_shape: tuple[int, ...] = (1, 1, 1, -1),
    residual: bool = False,
    slopes: bool = False,
    seed: int = 0,
) -> bytes:
    """x -> depthwise RELU -> h; h * gate(h) -> 1x1 conv [+ x] [-> PRELU]."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.depthwise_conv2d(x, b.rand((1, 3, 3, c)), b.rand((c,), 0.2), activation="RELU")
    s = _gate(b, h, c, gate_shape)
    g = b.mul(s, h) if gate_first else b.mul(h, s)
    y = b.conv2d(g, b.rand((out, 1, 1, c)), b.rand((out,), 0.2))
    if residual:
        y = b.add(y, x)
    if slopes:
        y = b.prelu(y, np.linspace(-0.5, 1.5, out).astype(np.float32).reshape(1, 1, out))
    b.output(y)
    return b.build()


CASES = [
    ((1, 7, 7, 16), {}),  # MobileNetV3's late blocks: a 7x7 map
    ((1, 6, 5, 12), {"gate_first": True}),
    ((1, 5, 7, 8), {"gate_shape": (-1,)}),  # a gate of shape [C]
    ((1, 6, 6, 6), {"out": 10}),  # channels not a multiple of 4: the scalar loads
    ((1, 7, 7, 16), {"out": 16, "residual": True}),
    ((1, 6, 6, 8), {"slopes": True}),  # a gate and slopes: their arguments in order
    ((1, 7, 7, 16), {"out": 16, "residual": True, "slopes": True}),
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_the_gate_runs_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], kw: Any
) -> None:
    on = _both(_se_block(shape, seed=sum(shape), **kw), runtime, folded=1)
    assert folded_nodes(on, "+GATE") == 1


@pytest.mark.parametrize("splits", [2, 3])
def test_a_split_gemm_scales_every_split(runtime: str, splits: int) -> None:
    # K split over groups (small maps on a large GPU): each split scales its own columns.
    on = _both(_se_block((1, 6, 6, 40), out=24, seed=splits), runtime, folded=1, gemm_splits=splits)
    assert folded_nodes(on, "+GATE") == 1
    assert any(k.kernel == "gemm_nt_splitk" for k in on.delegate.profile().kernels)


def test_half_storage_reads_the_gate_as_half(runtime: str) -> None:
    on = _both(_se_block((1, 7, 7, 16), seed=3), runtime, folded=1, precision="fp16")
    assert folded_nodes(on, "+GATE") == 1


def two_readers() -> bytes:
    """A gated value that two 1x1 convolutions read."""
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), activation="RELU")
    g = b.mul(h, _gate(b, h, 8))
    b.output(b.conv2d(g, b.rand((12, 1, 1, 8)), b.rand((12,), 0.2)))
    b.output(b.conv2d(g, b.rand((4, 1, 1, 8)), None))
    return b.build()


def test_two_convolutions_reading_the_gated_value_both_take_the_gate(runtime: str) -> None:
    on = _both(two_readers(), runtime, folded=1)
    assert folded_nodes(on, "+GATE") == 2


def _stays(model: bytes, runtime: str) -> None:
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+GATE") == 0
    assert any(k.op == "MUL" and k.shape.count("[") == 3 for k in r.delegate.profile().kernels), (
        r.delegate.profile().table()
    )


@pytest.mark.parametrize("case", ["activation", "constant", "read_elsewhere", "3x3", "small_m"])
def test_what_keeps_its_mul(runtime: str, case: str) -> None:
    b = ModelBuilder(seed=5)
    hw = 2 if case == "small_m" else 6  # 4 rows: the small-M kernel, which takes no gate
    x = b.input("x", (1, hw, hw, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), activation="RELU")
    s = b.rand((1, 1, 1, 8), 1.0) if case == "constant" else _gate(b, h, 8)
    g = b.mul(h, s, "RELU" if case == "activation" else None)
    k = 3 if case == "3x3" else 1
    y = b.conv2d(g, b.rand((12, k, k, 8)), b.rand((12,), 0.2), 1, 1, "SAME")
    b.output(b.add(y, b.conv2d(g, b.rand((12, 1, 1, 8)), None)) if case == "read_elsewhere" else y)
    if case == "read_elsewhere":
        b.output(g)
    if case == "constant":
        # A constant vector is a batch normalization's scale: the affine fold takes it.
        r = check_parity(b.build(), runtime, profiling=True, expect_delegated="all")
        assert (folded_nodes(r, "+GATE"), folded_nodes(r, "+AFFINE")) == (0, 1)
        return
    _stays(b.build(), runtime)


def test_two_images_keep_their_mul(runtime: str) -> None:
    # A gate per image: the GEMM's rows of both images would need both gates.
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), activation="RELU")
    b.output(b.conv2d(b.mul(h, _gate(b, h, 8)), b.rand((12, 1, 1, 8)), b.rand((12,), 0.2)))
    _stays(b.build(), runtime)


def test_the_cost_model_counts_the_folded_launches(runtime: str) -> None:
    counts, launched = estimated_and_launched(_se_block((1, 7, 7, 16), seed=7), runtime)
    assert counts and counts[0] == launched


def test_repeated_invokes_read_each_invokes_gate(runtime: str) -> None:
    # The gate is computed each invoke: new inputs, new gates, no stale values.
    m = _se_block((1, 7, 7, 16), residual=True, out=16, seed=8)
    for seed in (1, 2, 3):
        check_parity(m, runtime, seed=seed, expect_delegated="all")
