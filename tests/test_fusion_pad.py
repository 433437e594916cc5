"""A PAD of zeros on H and W folded into the CONV_2D / DEPTHWISE_CONV_2D that alone reads it
(fusion/pad.cc, AttachPad): the convolution reads the PAD's input and counts its rows and
columns as padding, so the PAD runs no kernel. Against TFLite's CPU kernels (float within the
fp32 tolerance, int8 bit-exact) with the pass on and off: symmetric and asymmetric pads, strides,
dilation, SAME padding on top, a 1x1 convolution, every convolution algorithm that applies, a
depthwise that then folds into its pointwise GEMM (and the expand before it); and what must
not fold (a nonzero PADV2, MIRROR_PAD, channel pads, a PAD read twice, a PAD before a pool)."""

from __future__ import annotations

from typing import Any

import pytest
from folds import launches as _launches
from int8_parity import check_int8_parity
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

NO_PAD = "clamp,epilogue,residual,views,squeeze,depthwise,expand"  # every pass but pad


def _pads_run(r: Any) -> int:
    return sum(1 for k in r.delegate.profile().kernels if k.op in ("PAD", "PADV2"))


def conv_after_pad(
    shape: tuple[int, int, int, int],
    pads: tuple[int, int, int, int],
    *,
    k: int = 3,
    stride: int = 1,
    dilation: int = 1,
    padding: str = "VALID",
    depthwise: bool = False,
    out: int = 8,
    v2: float | None = None,
    seed: int = 0,
) -> bytes:
    """x -> a 1x1 conv (so the PAD's input is an activation) -> PAD (top, bottom, left, right)
    -> conv or depthwise."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    p = [[0, 0], [pads[0], pads[1]], [pads[2], pads[3]], [0, 0]]
    y = b.pad(h, p) if v2 is None else b.pad_v2(h, p, v2)
    if depthwise:
        z = b.depthwise_conv2d(
            y, b.rand((1, k, k, c)), b.rand((c,), 0.2), stride, dilation, padding, 1, "RELU6"
        )
    else:
        z = b.conv2d(y, b.rand((out, k, k, c)), b.rand((out,), 0.2), stride, dilation, padding)
    b.output(z)
    return b.build()


CASES = [
    ((1, 9, 9, 8), (1, 1, 1, 1), {}),
    ((1, 10, 12, 8), (0, 1, 0, 1), {"stride": 2}),  # Keras' ZeroPadding2D before a strided conv
    ((1, 8, 8, 4), (2, 2, 2, 2), {"k": 5, "dilation": 2}),
    ((1, 7, 9, 6), (1, 0, 2, 1), {"padding": "SAME"}),  # a PAD and SAME padding together
    ((2, 6, 6, 8), (1, 1, 0, 0), {"k": 1}),
    ((1, 11, 11, 8), (0, 1, 0, 1), {"stride": 2, "depthwise": True}),
    ((1, 9, 9, 8), (1, 1, 1, 1), {"depthwise": True}),
]


@pytest.mark.parametrize("shape,pads,kw", CASES)
def test_pad_runs_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], pads: tuple[int, int, int, int], kw: Any
) -> None:
    model = conv_after_pad(shape, pads, seed=sum(shape) + sum(pads), **kw)
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all"}
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_PAD, **common)
    assert _pads_run(on) == 0 and _pads_run(off) == 1
    assert _launches(on) == _launches(off) - 1


@pytest.mark.parametrize(
    "algorithm",
    ["direct", "implicit_gemm", "winograd", "winograd4", "winograd4_fused", "direct_blocked"],
)
def test_every_convolution_algorithm_reads_the_pad(runtime: str, algorithm: str) -> None:
    for shape, pads, kw in CASES[:4]:
        model = conv_after_pad(shape, pads, seed=7, **kw)
        on = check_parity(
            model, runtime, profiling=True, expect_delegated="all", conv_algorithm=algorithm
        )
        assert _pads_run(on) == 0


@pytest.mark.parametrize("shape,pads,kw", [CASES[0], CASES[1], CASES[2], CASES[5], CASES[6]])
def test_int8_pad_runs_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], pads: tuple[int, int, int, int], kw: Any
) -> None:
    seed = 3 + sum(pads)
    model = quantize_model(
        conv_after_pad(shape, pads, seed=seed, **kw), io="int8", seed=seed, jitter=0.3
    )
    on = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True)
    off = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True, fuse=NO_PAD)
    assert _pads_run(on) == 0 and _pads_run(off) == 1
    assert _launches(on) == _launches(off) - 1


def test_a_keyword_spotters_strided_block_is_one_launch(runtime: str) -> None:
    """expand -> PAD -> depthwise (stride 2) -> project, int8 as the public corpus'
    keyword_spotting_mobilenetv2 writes it: with the PAD folded the depthwise and the expand
    fold into the projection's GEMM too."""
    b = ModelBuilder(seed=11)
    x = b.input("x", (1, 9, 9, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), 1, 1, "SAME", "RELU")
    e = b.conv2d(h, b.rand((16, 1, 1, 8)), b.rand((16,), 0.2), 1, 1, "SAME", "RELU6")
    p = b.pad(e, [[0, 0], [0, 1], [0, 1], [0, 0]])
    d = b.depthwise_conv2d(p, b.rand((1, 3, 3, 16)), b.rand((16,), 0.2), 2, 1, "VALID", 1, "RELU6")
    b.output(b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME"))
    model = quantize_model(b.build(), io="int8", seed=11, jitter=0.3)
    on = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True)
    assert _launches(on) == 2, on.delegate.profile().table()  # the first conv, the block
    assert any("+EXPAND+DEPTHWISE" in k.algorithm for k in on.delegate.profile().kernels)


def test_what_must_not_fold(runtime: str) -> None:
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all"}
    # PADV2 of zeros folds; of another value it does not.
    assert (
        _pads_run(
            check_parity(conv_after_pad((1, 8, 8, 8), (1, 1, 1, 1), v2=0.0), runtime, **common)
        )
        == 0
    )
    assert (
        _pads_run(
            check_parity(conv_after_pad((1, 8, 8, 8), (1, 1, 1, 1), v2=0.5), runtime, **common)
        )
        == 1
    )
    # MIRROR_PAD, a pad on channels, a PAD read twice, a PAD before a pool.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 8, 8, 8))
    m = b.mirror_pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    b.output(b.conv2d(m, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "VALID"))
    assert _pads_run(check_parity(b.build(), runtime, **common)) == 0  # MIRROR_PAD runs as such
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 8, 8, 8))
    y = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 4]])
    b.output(b.conv2d(y, b.rand((8, 3, 3, 12)), b.rand((8,), 0.2), 1, 1, "VALID"))
    assert _pads_run(check_parity(b.build(), runtime, **common)) == 1
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 8, 8, 8))
    y = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    b.output(b.conv2d(y, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "VALID"))
    b.output(y)
    assert _pads_run(check_parity(b.build(), runtime, **common)) == 1
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 8, 8, 8))
    y = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    b.output(b.max_pool2d(y, 3, 1, "VALID"))
    assert _pads_run(check_parity(b.build(), runtime, **common)) == 1
