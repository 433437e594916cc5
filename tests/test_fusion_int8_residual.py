"""A residual int8 ADD folded into the int8 CONV_2D producing one of its operands (fusion/attach.h):
the conv's GEMM requantizes its output integers (its own clamp included) and applies the ADD's
integer arithmetic to them and the other operand (quant_add in kernels/quant.cl), so the ADD runs
no kernel. Bit-exact against TFLite's int8 kernels with fusion on and off (option fuse_add): the
conv's output as either operand (the ADD's two multipliers differ), its own activation, the ADD's
activation, the 1x1 GEMM and the implicit GEMM, split along K, in chunks; the forced direct
kernel does not fold. A PRELU after the ADD (one slope or one per channel) goes with it as a table
of the ADD's integers, which the conv's GEMM applies after the ADD."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import launches as _launches
from int8_parity import Int8Result, check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model


def _fused(r: Int8Result) -> set[int]:
    return {k.node for k in r.delegate.profile().kernels if k.algorithm.endswith("+ADD")}


def residual_model(
    shape: tuple[int, int, int, int],
    kernel: int,
    conv_first: bool,
    conv_act: str | None = None,
    add_act: str | None = None,
    pow2: bool = False,
    seed: int = 0,
) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    # A first conv so that the residual is an activation, not the model's input.
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    y = b.conv2d(h, b.rand((c, kernel, kernel, c)), b.rand((c,), 0.2), 1, 1, "SAME", conv_act)
    b.output(b.add(y, h, add_act) if conv_first else b.add(h, y, add_act))
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.4, pow2_scales=pow2)


def check_residual(model: bytes, runtime: str, folded: int, **options: Any) -> Int8Result:
    common = {"min_fraction": 1.0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse_add=False)
    assert not _fused(off)
    assert len(_fused(on)) == folded, on.delegate.profile().table()
    if "max_alloc_bytes" not in options:  # chunks copy boxes: other commands
        assert _launches(on) == _launches(off) - folded, on.delegate.profile().table()
    return on


@pytest.mark.parametrize("conv_first", [True, False], ids=["conv_first", "conv_second"])
@pytest.mark.parametrize("kernel", [1, 3])
def test_residual_add_folds_into_the_int8_conv(runtime: str, kernel: int, conv_first: bool) -> None:
    check_residual(residual_model((1, 9, 7, 24), kernel, conv_first, seed=kernel), runtime, 1)


@pytest.mark.parametrize(
    "conv_act,add_act,pow2",
    [("RELU6", None, False), (None, "RELU", False), ("RELU", "RELU6", True), (None, None, True)],
)
def test_residual_add_with_activations(
    runtime: str, conv_act: str | None, add_act: str | None, pow2: bool
) -> None:
    # The conv's clamp comes before the ADD's arithmetic, the ADD's after it; power-of-two scales
    # make every rounding a tie.
    m = residual_model((1, 6, 6, 16), 3, True, conv_act, add_act, pow2, seed=3)
    check_residual(m, runtime, 1)


@pytest.mark.parametrize("kernel", [1, 3])
def test_residual_add_with_split_k(runtime: str, kernel: int) -> None:
    # The last group of each tile applies the output stage, then the ADD.
    m = residual_model((1, 5, 5, 40), kernel, False, seed=5)
    r = check_residual(m, runtime, 1, gemm_splits=3)
    assert any("_splitk/" in k.algorithm for k in r.delegate.profile().kernels)


def test_residual_add_in_chunks(runtime: str) -> None:
    # A largest allocation of 2 KiB, less than the packed 3x3 filter (16 x 144 bytes): the conv
    # runs in chunks of output channels, each reading the residual in the box it writes.
    m = residual_model((1, 6, 6, 16), 3, True, seed=7)
    r = check_residual(m, runtime, 1, max_alloc_bytes=2048)
    assert any("chunks" in d["note"] for d in r.decisions)


def test_forced_direct_kernel_leaves_the_add(runtime: str) -> None:
    m = residual_model((1, 6, 6, 8), 3, True, seed=9)
    check_residual(m, runtime, 0, conv_algorithm="direct")


def test_broadcast_or_float_adds_do_not_fold(runtime: str) -> None:
    # An ADD of a per-channel constant broadcasts: it runs as itself.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 5, 5, 8))
    y = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), 1, 1, "SAME", None)
    b.output(b.add(y, np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 1, 1, 8)))
    m = quantize_model(b.build(), io="int8", seed=2)
    check_residual(m, runtime, 0)


def _prelu_block(shape: tuple[int, int, int, int], slopes: str, seed: int) -> bytes:
    """conv -> ADD(h) -> PRELU: a PRELU residual block (face-landmark CNNs), int8."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    y = b.conv2d(h, b.rand((c, 3, 3, c)), b.rand((c,), 0.2), 1, 1, "SAME")
    alpha = (
        np.linspace(-0.4, 0.8, c, dtype=np.float32)
        if slopes == "channels"
        else np.full((1, 1, 1), 0.25, np.float32)
    )
    b.output(b.prelu(b.add(y, h), alpha))
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.4)


@pytest.mark.parametrize("slopes", ["channels", "one"])
@pytest.mark.parametrize("options", [{}, {"gemm_splits": 3}], ids=["whole", "split_k"])
def test_a_prelu_after_the_add_moves_with_it(
    runtime: str, slopes: str, options: dict[str, Any]
) -> None:
    # The epilogue fold gives the PRELU's table to the ADD; the residual fold moves the ADD and its
    # table into the conv, whose GEMM maps the ADD's sum through it: conv, ADD and PRELU in one
    # launch (two fewer than without fusion).
    m = _prelu_block((1, 7, 6, 16), slopes, seed=11)
    on = check_int8_parity(m, runtime, min_fraction=1.0, profiling=True, **options)
    off = check_int8_parity(m, runtime, min_fraction=1.0, profiling=True, fuse_add=False, **options)
    assert len(_fused(on)) == 1, on.delegate.profile().table()
    assert _launches(on) == _launches(off) - 2, on.delegate.profile().table()


def test_an_add_no_conv_takes_keeps_the_prelu_table(runtime: str) -> None:
    # Both operands are inputs: the ADD's own kernel stores through the PRELU's tables.
    b = ModelBuilder(seed=13)
    x, y = b.input("x", (1, 5, 3, 12)), b.input("y", (1, 5, 3, 12))
    b.output(b.prelu(b.add(x, y), np.linspace(-0.5, 0.7, 12, dtype=np.float32)))
    m = quantize_model(b.build(), io="int8", seed=13, jitter=0.4)
    on = check_int8_parity(m, runtime, min_fraction=1.0, profiling=True)
    off = check_int8_parity(m, runtime, min_fraction=1.0, profiling=True, fuse_add=False)
    assert any(k.algorithm == "int8+TABLE" for k in on.delegate.profile().kernels)
    assert _launches(on) == _launches(off) - 1, on.delegate.profile().table()
