"""MAX_POOL_2D and AVERAGE_POOL_2D on int8 tensors against TFLite's integer kernels, bit for bit:
the average's rounding (clipped SAME windows of every size give many exact halves), channel
counts with and without the 4-channel path, fused activations, and a pool too large for one
buffer (run in chunks)."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # input, size, stride, padding, activation
    ((1, 9, 11, 5), 3, 2, "SAME", None),
    ((2, 8, 8, 16), 2, 2, "VALID", "RELU6"),
    ((1, 7, 7, 3), 7, 1, "VALID", "RELU"),
    ((1, 10, 13, 8), (3, 2), (1, 2), "SAME", "RELU_N1_TO_1"),
    ((1, 15, 15, 4), 5, 3, "SAME", None),
]


def _pool_model(case, kind: str) -> bytes:
    """One int8 pool (a CASES / GLOBAL row), int8 in and out."""
    shape, size, stride, padding, act = case
    b = ModelBuilder()
    x = b.input("x", shape)
    pool = b.max_pool2d if kind == "max" else b.avg_pool2d
    b.output(pool(x, size, stride, padding, activation=act))
    return quantize_model(b.build(), io="int8", seed=shape[3], jitter=0.3)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_int8(runtime: str, case, kind: str) -> None:
    check_int8_parity(_pool_model(case, kind), runtime, min_fraction=1.0)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_int8_in_chunks(runtime: str, kind: str) -> None:
    # A largest allocation of 1 KiB: the 4 KiB int8 input lives in pieces, the pool runs in
    # chunks sized in bytes of int8.
    b = ModelBuilder()
    x = b.input("x", (1, 16, 16, 16))
    b.output((b.max_pool2d if kind == "max" else b.avg_pool2d)(x, 3, 1, "SAME"))
    model = quantize_model(b.build(), io="int8", seed=3)
    r = check_int8_parity(model, runtime, min_fraction=1.0, max_alloc_bytes=1024)
    assert "chunks" in r.decisions[0]["note"]


GLOBAL = [
    # input, size, stride, padding, activation: windows over the whole image
    ((1, 25, 5, 40), (25, 5), 1, "VALID", None),
    ((2, 5, 5, 70), 5, 5, "SAME", "RELU6"),
    ((1, 3, 3, 300), 3, 1, "VALID", "RELU"),
]


@pytest.mark.parametrize("case", GLOBAL)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_global_pool_int8_runs_as_a_reduction(runtime: str, case, kind: str) -> None:
    """A global pool's channels split over groups whose lanes share the pixels
    (pool2d_int_whole), where the window kernel walked every pixel in one work-item per channel
    (16 us for ds_cnn's 25 x 5 x 276 on an H100): still TFLite's integers, bit for bit."""
    model = _pool_model(case, kind)
    r = check_int8_parity(model, runtime, min_fraction=1.0, max_quanta=0, profiling=True)
    assert {k.algorithm for k in r.delegate.profile().kernels} == {"whole_int"}
