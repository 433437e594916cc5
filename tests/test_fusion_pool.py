"""An int8 MAX_POOL_2D of 2x2 windows and stride 2 folded into the int8 CONV_2D before it
(fusion/pool.cc): the conv's implicit GEMM computes each window's four pixels in one group and
writes their largest byte (kernels/gemm_int8.cl's POOL2), so the pool runs no kernel. Bit-exact
against TFLite's int8 kernels with the pass on and off: 3x3 and 1x1 convolutions, odd sizes
(VALID drops the last row and column), two images, the conv's activation and a folded table
before the pool, split K; not folded where the pool has an activation, pads an odd size, or the
conv's output has another reader; the cost model counts the launch it saves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, launches
from int8_parity import Int8Result, check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

NO_POOL = "affine,pad,clamp,epilogue,residual,views,squeeze,gate,depthwise,prelu,expand"


def pool_model(
    shape: tuple[int, int, int, int],
    kernel: int = 3,
    out: int = 16,
    conv_act: str | None = "RELU",
    pool_padding: str = "VALID",
    pool_act: str | None = None,
    tail: str | None = None,
    seed: int = 0,
) -> bytes:
    """conv -> [tail] -> max pool 2x2 / 2 -> conv: the pool's output an activation, as in a CNN."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    y = b.conv2d(x, b.rand((out, kernel, kernel, c)), b.rand((out,), 0.2), 1, 1, "SAME", conv_act)
    if tail == "tanh":
        y = b.tanh(y)
    p = b.max_pool2d(y, 2, 2, pool_padding, pool_act)
    if tail == "second_reader":
        b.output(b.add(y, b.rand((out,))))
    b.output(b.conv2d(p, b.rand((8, 3, 3, out)), b.rand((8,), 0.2), 1, 1, "SAME", None))
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.3)


def _pooled(r: Int8Result) -> int:
    return folded_nodes(r, "+POOL")


def check_pool(model: bytes, runtime: str, folded: int, **options: Any) -> Int8Result:
    common = {"min_fraction": 1.0, "max_quanta": 0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse=NO_POOL)
    assert _pooled(off) == 0
    assert _pooled(on) == folded, on.delegate.profile().table()
    assert launches(on) == launches(off) - folded, on.delegate.profile().table()
    return on


@pytest.mark.parametrize(
    "shape,kernel",
    [
        ((1, 10, 12, 8), 3),
        ((1, 10, 12, 8), 1),  # a 1x1 layer: the implicit GEMM instead of the plain one
        ((1, 9, 7, 4), 3),  # odd: VALID pools 4 x 3, the last row and column dropped
        ((2, 6, 10, 12), 3),  # two images
        ((1, 34, 30, 3), 3),  # more pooled pixels than one group's rows, three channels
    ],
    ids=["3x3", "1x1", "odd", "batch2", "wide"],
)
def test_max_pool_folds_into_the_int8_conv(
    runtime: str, shape: tuple[int, int, int, int], kernel: int
) -> None:
    check_pool(pool_model(shape, kernel, seed=kernel + shape[1]), runtime, 1)


@pytest.mark.parametrize("conv_act", [None, "RELU6"])
def test_max_pool_after_the_convs_clamp(runtime: str, conv_act: str | None) -> None:
    check_pool(pool_model((1, 8, 8, 8), conv_act=conv_act, seed=2), runtime, 1)


def test_max_pool_after_a_folded_table(runtime: str) -> None:
    # TANH folds into the conv as a table of its integers; the pool maxes the table's bytes.
    r = check_pool(pool_model((1, 8, 6, 8), conv_act=None, tail="tanh", seed=4), runtime, 1)
    assert not any(k.op == "TANH" for k in r.delegate.profile().kernels)


def test_max_pool_with_split_k(runtime: str) -> None:
    # The last group of each tile reads the sums back and pools them.
    m = pool_model((1, 4, 6, 48), out=40, seed=6)
    r = check_pool(m, runtime, 1, gemm_splits=3)
    assert any(
        "_splitk/" in k.algorithm and "+POOL" in k.algorithm for k in r.delegate.profile().kernels
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"pool_act": "RELU"}, {"pool_padding": "SAME"}, {"tail": "second_reader"}],
    ids=["pool_activation", "same_odd", "second_reader"],
)
def test_max_pool_that_does_not_fold(runtime: str, kwargs: dict[str, Any]) -> None:
    # SAME over 9 x 7 pools 5 x 4: its last window is partly outside, not the conv's halved.
    check_pool(pool_model((1, 9, 7, 8), seed=7, **kwargs), runtime, 0)


def test_direct_conv_does_not_fold(runtime: str) -> None:
    r = check_int8_parity(
        pool_model((1, 8, 8, 8), seed=8),
        runtime,
        min_fraction=1.0,
        max_quanta=0,
        profiling=True,
        conv_algorithm="direct",
    )
    assert _pooled(r) == 0


def test_two_conv_pool_stages_as_a_small_cnn(runtime: str) -> None:
    """An image classifier's trunk: conv, pool, conv, pool; the estimate counts the launches."""
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 28, 28, 1))
    for c_in, c_out in ((1, 8), (8, 16)):
        x = b.conv2d(x, b.rand((c_out, 3, 3, c_in)), b.rand((c_out,), 0.2), 1, 1, "VALID", "RELU")
        x = b.max_pool2d(x, 2, 2, "VALID")
    b.output(b.reshape(x, (1, int(np.prod(b.shape(x))))))
    model = quantize_model(b.build(), io="int8", seed=9)
    check_pool(model, runtime, 2)
    estimated, launched = estimated_and_launched(model, runtime)
    assert set(estimated) == {launched} == {2}, (estimated, launched)
