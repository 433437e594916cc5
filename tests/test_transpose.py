"""TRANSPOSE parity with stock TFLite CPU: ranks 1-6, several permutations each."""

from __future__ import annotations

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = [
    ((7,), (0,)),
    ((5, 3), (1, 0)),
    ((5, 3), (0, 1)),
    ((2, 3, 5), (2, 0, 1)),
    ((2, 3, 5), (1, 0, 2)),
    ((3, 1, 7), (0, 2, 1)),
    ((2, 3, 4, 5), (0, 3, 1, 2)),  # NHWC -> NCHW
    ((2, 5, 3, 4), (0, 2, 3, 1)),  # NCHW -> NHWC
    ((2, 3, 4, 5), (3, 2, 1, 0)),
    ((1, 9, 1, 17), (0, 2, 1, 3)),
    ((2, 3, 1, 4, 5), (4, 0, 3, 1, 2)),
    ((2, 3, 1, 4, 5), (0, 1, 2, 4, 3)),
    ((3, 2, 2, 3, 2), (1, 3, 0, 4, 2)),
    ((2, 1, 3, 2, 4, 3), (5, 4, 3, 2, 1, 0)),
    ((2, 1, 3, 2, 4, 3), (0, 2, 1, 4, 3, 5)),
    ((3, 2, 1, 2, 2, 5), (1, 5, 0, 3, 2, 4)),
    # Large enough for the tiled 2-D path, with partial tiles; axes that merge into one.
    ((37, 45), (1, 0)),
    ((64, 65), (1, 0)),
    ((3, 40, 33), (0, 2, 1)),
    ((2, 9, 3, 10), (0, 2, 3, 1)),
    ((1, 16, 16, 24), (0, 3, 1, 2)),
    ((2, 24, 5, 7), (0, 2, 3, 1)),
]


def transpose_model(shape: tuple[int, ...], perm: tuple[int, ...]) -> bytes:
    b = ModelBuilder()
    b.output(b.transpose(b.input("x", shape), perm))
    return b.build()


@pytest.mark.parametrize(
    ("shape", "perm"),
    CASES,
    ids=[f"{'x'.join(map(str, s))}-{''.join(map(str, p))}" for s, p in CASES],
)
def test_transpose_parity(shape: tuple[int, ...], perm: tuple[int, ...], runtime: str) -> None:
    r = check_parity(transpose_model(shape, perm), runtime, expect_delegated="all", atol=0, rtol=0)
    assert r.outputs[0].shape == tuple(shape[p] for p in perm)


def test_int32_transpose_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    b.output(b.transpose(b.input("x", (2, 3, 4), "int32"), (2, 0, 1)))
    r = check_parity(b.build(), runtime, expect_cpu="all", atol=0, rtol=0)
    assert "float32" in r.reason(0)


def test_transpose_between_convs(runtime: str) -> None:
    # NHWC -> NWHC -> conv: the permuted layout feeds a claimed op inside the partition.
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 5, 9, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)))
    y = b.transpose(y, (0, 2, 1, 3))
    y = b.conv2d(y, b.rand((6, 1, 1, 4)), activation="RELU")
    b.output(y)
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
