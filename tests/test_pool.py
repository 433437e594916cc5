"""MAX_POOL_2D and AVERAGE_POOL_2D parity with stock TFLite CPU: SAME/VALID, strides, square
and rectangular windows (also larger than the input under SAME), C with and without float4
runs, batch > 1, fused activations; unsupported activations stay on the CPU."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


class Pool(NamedTuple):
    shape: tuple[int, int, int, int]
    size: int | tuple[int, int]
    stride: int | tuple[int, int]
    padding: str = "VALID"
    activation: str | None = None


CASES = {
    "2x2_s2_valid_c8": Pool((1, 8, 8, 8), 2, 2),
    "2x2_s2_same_odd_c3": Pool((2, 9, 7, 3), 2, 2, "SAME"),
    "3x3_s2_same_c4": Pool((1, 11, 13, 4), 3, 2, "SAME", "RELU"),
    "3x3_s2_valid_c5": Pool((2, 11, 10, 5), 3, 2, "VALID", "RELU6"),
    "3x3_s1_same_c12": Pool((1, 7, 6, 12), 3, 1, "SAME", "RELU_N1_TO_1"),
    "3x3_s1_valid_c1": Pool((3, 6, 5, 1), 3, 1),
    "rect_2x3_s_1x2_same": Pool((1, 9, 10, 6), (2, 3), (1, 2), "SAME"),
    "rect_3x1_s_3x1_valid": Pool((2, 10, 5, 8), (3, 1), (3, 1)),
    "1x1_s3_same": Pool((1, 10, 8, 7), 1, 3, "SAME"),
    "5x5_larger_than_input_same": Pool((1, 3, 4, 4), 5, 2, "SAME"),
    "global_valid": Pool((2, 7, 5, 16), (7, 5), 1),
    "stride_over_window": Pool((1, 12, 11, 2), 2, 3, "SAME"),
}

KINDS = ["max", "avg"]


def pool_model(case: Pool, kind: str) -> bytes:
    b = ModelBuilder()
    x = b.input("x", case.shape)
    op = b.max_pool2d if kind == "max" else b.avg_pool2d
    b.output(op(x, case.size, case.stride, case.padding, case.activation))
    return b.build()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_pool_parity(case: Pool, kind: str, runtime: str) -> None:
    # Max is exact; an average sums in a different order than the CPU.
    tol = {"atol": 0, "rtol": 0} if kind == "max" else {}
    check_parity(pool_model(case, kind), runtime, expect_delegated="all", **tol)


@pytest.mark.parametrize("kind", KINDS)
def test_pool_kernels_in_profile(kind: str, runtime: str) -> None:
    r = check_parity(
        pool_model(CASES["3x3_s2_same_c4"], kind), runtime, expect_delegated="all", profiling=True
    )
    assert {k.kernel for k in r.delegate.profile().kernels} == {f"{kind}_pool2d_c4"}


@pytest.mark.parametrize("kind", KINDS)
def test_pool_tanh_activation_stays_on_cpu(kind: str, runtime: str) -> None:
    case = Pool((1, 6, 6, 4), 2, 2, activation="TANH")
    r = check_parity(pool_model(case, kind), runtime, expect_cpu="all")
    assert "activation" in r.reason(0)


def test_pools_between_convs_one_partition(runtime: str) -> None:
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 12, 10, 3))
    y = b.conv2d(x, b.rand((8, 3, 3, 3)), activation="RELU")
    y = b.max_pool2d(y, 3, 2, "SAME")
    y = b.conv2d(y, b.rand((6, 3, 3, 8)), activation="RELU")
    b.output(b.avg_pool2d(y, 2, 2, "VALID"))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


# Windows covering the whole image run as a reduction over H x W (src_cpp/ops/reduce_tiled.h): one
# group for small maps, slices summed by a second launch when few groups would walk a large one.
WHOLE = {
    "valid_small": (Pool((2, 7, 5, 16), (7, 5), 1), "whole_tiled"),
    "same_window_larger": (Pool((1, 9, 9, 8), (12, 12), 12, "SAME", "RELU"), "whole_tiled"),
    "large_split": (Pool((1, 96, 80, 16), (96, 80), 1, "VALID", "RELU6"), "whole_tiled_split"),
    "odd_channels_split": (Pool((1, 64, 64, 3), (64, 64), 2), "whole_tiled_split"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", WHOLE.values(), ids=WHOLE.keys())
def test_pool_whole_image_runs_as_reduction(
    case: tuple[Pool, str], kind: str, runtime: str
) -> None:
    pool, algorithm = case
    tol = {"atol": 0, "rtol": 0} if kind == "max" else {}
    r = check_parity(pool_model(pool, kind), runtime, expect_delegated="all", profiling=True, **tol)
    kernels = r.delegate.profile().kernels
    assert {k.algorithm for k in kernels} == {algorithm}
    assert {k.kernel for k in kernels} == {"reduce_tiled"}


@pytest.mark.parametrize("kind", KINDS)
def test_pool_whole_image_fp16(kind: str, runtime: str) -> None:
    pool = Pool((1, 96, 80, 16), (96, 80), 1)
    check_parity(pool_model(pool, kind), runtime, precision="fp16", rtol=1e-2, atol=1e-2)


def test_pool_whole_image_with_folded_epilogue(runtime: str) -> None:
    # A folded LOGISTIC must apply once, to the mean, not to each slice's partial sum.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 96, 80, 16))
    y = b.avg_pool2d(x, (96, 80), 1, "VALID")
    b.output(b.logistic(y))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    kernels = r.delegate.profile().kernels
    assert {k.op for k in kernels} == {"AVERAGE_POOL_2D"}, "the LOGISTIC did not fold"
