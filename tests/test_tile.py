"""TILE (src_cpp/ops/tile.cc) against stock TFLite CPU: ranks 1 to 5, multiples of 1 on some
axes, fp16 storage, Keras 3's UpSampling2D (RESHAPE -> TILE -> RESHAPE -> TILE -> RESHAPE) as one
partition with the convs around it, and runtime multiples left to the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "rank1": ((5,), [3]),
    "rank2": ((3, 4), [2, 1]),
    "rank3": ((2, 3, 4), [1, 3, 2]),
    "rank4_spatial": ((1, 4, 5, 3), [1, 2, 2, 1]),
    "rank5_repeat": ((1, 6, 1, 5, 3), [1, 1, 2, 1, 1]),
    "ones": ((2, 3), [1, 1]),
}


@pytest.mark.parametrize("case", CASES)
def test_tile_parity(case: str, runtime: str) -> None:
    shape, multiples = CASES[case]
    b = ModelBuilder(seed=1)
    b.output(b.tile(b.input("x", shape), multiples))
    check_parity(b.build(), runtime, expect_delegated="all")


def test_tile_fp16_storage(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    b.output(b.tile(b.input("x", (1, 4, 5, 3)), [1, 2, 3, 1]))
    check_parity(b.build(), runtime, rtol=1e-2, atol=2e-2, expect_delegated="all", precision="fp16")


def upsampling2d_keras3(b: ModelBuilder, x: int) -> int:
    """Keras 3's UpSampling2D(2) as TF's converter writes it: each axis repeated by a TILE."""
    n, h, w, c = b.shape(x)
    y = b.tile(b.reshape(x, (n, h, 1, w, c)), [1, 1, 2, 1, 1])
    y = b.tile(b.reshape(y, (n, 2 * h, w, 1, c)), [1, 1, 1, 2, 1])
    return b.reshape(y, (n, 2 * h, 2 * w, c))


def test_keras3_upsampling_is_one_partition(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), stride=2, activation="RELU")
    b.output(b.conv2d(upsampling2d_keras3(b, y), b.rand((3, 3, 3, 4))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_tile_with_runtime_multiples_stays_on_cpu(runtime: str) -> None:
    import tflite

    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 3))
    m = b.input("m", (2,), "int32")
    b.output(b._op(tflite.BuiltinOperator.TILE, [x, m], [(4, 3)], options="TileOptions")[0])
    inputs = [np.ones((2, 3), np.float32), np.array([2, 1], np.int32)]
    r = check_parity(b.build(), runtime, inputs, expect_cpu="all")
    assert "multiples" in r.reason(0) and "constant" in r.reason(0), r.reason(0)
