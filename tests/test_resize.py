"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR parity with stock TFLite CPU: upscale,
downscale, odd sizes, every align_corners / half_pixel_centers combination the CPU runs,
C with and without float4 runs, batch > 1; a size that is not constant stays on the CPU."""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Resize(NamedTuple):
    shape: tuple[int, int, int, int]
    size: tuple[int, int]


SHAPES = {
    "up2x_c4": Resize((1, 5, 6, 4), (10, 12)),
    "up_odd_c3": Resize((2, 5, 7, 3), (11, 13)),
    "down_c8": Resize((1, 13, 11, 8), (5, 4)),
    "down_odd_c1": Resize((2, 9, 10, 1), (4, 7)),
    "mixed_c6": Resize((1, 6, 9, 6), (13, 4)),
    "to_1x1": Resize((1, 4, 5, 4), (1, 1)),
    "from_1x1": Resize((2, 1, 1, 5), (3, 4)),
    "same_size": Resize((1, 4, 4, 2), (4, 4)),
}
# (align_corners, half_pixel_centers): bilinear refuses both at once on the CPU.
FLAGS = [(False, False), (True, False), (False, True)]
NEAREST_FLAGS = [*FLAGS, (True, True)]


def resize_model(case: Resize, kind: str, align: bool, half: bool) -> bytes:
    b = ModelBuilder()
    x = b.input("x", case.shape)
    op = b.resize_nearest if kind == "nearest" else b.resize_bilinear
    b.output(op(x, case.size, align, half))
    return b.build()


def _ids(flags: list[tuple[bool, bool]]) -> list[str]:
    return [("align" if a else "") + ("half" if h else "") or "plain" for a, h in flags]


@pytest.mark.parametrize(("align", "half"), NEAREST_FLAGS, ids=_ids(NEAREST_FLAGS))
@pytest.mark.parametrize("case", SHAPES.values(), ids=SHAPES.keys())
def test_resize_nearest_parity(case: Resize, align: bool, half: bool, runtime: str) -> None:
    model = resize_model(case, "nearest", align, half)
    check_parity(model, runtime, expect_delegated="all", atol=0, rtol=0)


@pytest.mark.parametrize(("align", "half"), FLAGS, ids=_ids(FLAGS))
@pytest.mark.parametrize("case", SHAPES.values(), ids=SHAPES.keys())
def test_resize_bilinear_parity(case: Resize, align: bool, half: bool, runtime: str) -> None:
    check_parity(resize_model(case, "bilinear", align, half), runtime, expect_delegated="all")


def test_resize_kernels_in_profile(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (1, 4, 5, 3))
    b.output(b.resize_nearest(x, (8, 10)))
    b.output(b.resize_bilinear(x, (7, 9)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert {k.kernel for k in r.delegate.profile().kernels} == {
        "resize_nearest",
        "resize_bilinear",
    }


def test_bilinear_align_and_half_pixel_is_declined_like_the_cpu_refuses_it(runtime: str) -> None:
    d = clgpu_delegate.load(partitioning="all")
    model = resize_model(SHAPES["up2x_c4"], "bilinear", True, True)
    interp = make_interpreter(model, [d], runtime=runtime, reference=True)
    assert d.delegated_nodes() == []
    assert "half_pixel_centers" in d.decisions()[0].reason
    with pytest.raises(RuntimeError):
        interp.allocate_tensors()


@pytest.mark.parametrize("kind", ["nearest", "bilinear"])
def test_resize_to_a_size_computed_at_run_time_stays_on_cpu(kind: str, runtime: str) -> None:
    # The size comes from a graph input: TFLite makes the output dynamic; we decline.
    b = ModelBuilder()
    x = b.input("x", (1, 3, 4, 4))
    size = b.input("size", (2,), "int32")
    op = b.resize_nearest if kind == "nearest" else b.resize_bilinear
    y = op(x, (6, 8))
    # Rewire the resize to read the runtime size instead of its constant.
    b._ops[-1].inputs[1] = size
    b.output(y)
    model = b.build()
    inputs = [
        np.random.default_rng(0).standard_normal((1, 3, 4, 4)).astype(np.float32),
        np.array([6, 8], np.int32),
    ]
    r = check_parity(model, runtime, inputs=inputs, expect_cpu="all")
    assert "not constant" in r.reason(0)


@pytest.mark.parametrize(("align", "half"), list(itertools.product([False, True], repeat=2)))
def test_resize_nearest_between_convs_one_partition(align: bool, half: bool, runtime: str) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (2, 5, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")
    y = b.resize_nearest(y, (10, 12), align, half)
    y = b.resize_bilinear(y, (7, 9), align and not half, half)
    b.output(b.conv2d(y, b.rand((5, 1, 1, 4))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
