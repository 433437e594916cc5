"""SLICE (src_cpp/ops/slice.cc, an index map of ops/strided_copy.h) against stock TFLite CPU:
ranks 1 to 5, size -1, fp16 storage, a box of whole rows as a flat copy, chunks under a small
largest allocation, and a run-time size left to the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "rank1": ((9,), [2], [5]),
    "rank2_to_end": ((5, 7), [1, 3], [-1, -1]),
    "rank3": ((4, 5, 6), [1, 0, 2], [2, 5, 3]),
    "rank4_channels": ((1, 6, 7, 10), [0, 1, 2, 3], [1, 4, 5, -1]),
    "rank4_channels_vec4": ((2, 3, 4, 16), [0, 0, 0, 8], [2, 3, 4, 8]),
    "rank5": ((2, 3, 4, 5, 6), [1, 0, 1, 2, 0], [1, 3, 2, -1, 4]),
    "whole": ((3, 4), [0, 0], [-1, -1]),
    "empty": ((3, 4), [1, 0], [0, 4]),
}


def slice_model(case: str) -> bytes:
    shape, begin, size = CASES[case]
    b = ModelBuilder(seed=1)
    b.output(b.slice(b.input("x", shape), begin, size))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_slice_parity(case: str, runtime: str) -> None:
    check_parity(slice_model(case), runtime, expect_delegated="all")


def test_slice_fp16_storage(runtime: str) -> None:
    check_parity(slice_model("rank4_channels"), runtime, rtol=1e-2, atol=1e-2,
                 expect_delegated="all", precision="fp16")


def test_slice_of_whole_rows_is_a_flat_copy(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    x = b.relu(b.input("x", (6, 5, 4)))
    b.output(b.relu(b.slice(x, [2, 0, 0], [3, -1, -1])))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    kernels = {k.kernel for k in r.delegate.profile().kernels if k.op == "SLICE"}
    assert kernels == {"copy"}, kernels


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_slice_in_chunks(precision: str, runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.add(b.input("x", (1, 20, 24, 6)), 0.5)
    b.output(b.add(b.slice(x, [0, 1, 2, 1], [1, 18, 21, 5]), 1.0))
    limit = 4096 if precision == "fp32" else 2048
    tol = {} if precision == "fp32" else {"rtol": 1e-2, "atol": 1e-2}
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=limit,
                     precision=precision, **tol)
    assert r.delegate.memory()["chunked_ops"] >= 1, r.delegate.memory()


def test_runtime_size_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (4, 5))
    size = b.input("size", (2,), "int32")
    y = b._op(tflite.BuiltinOperator.SLICE, [x, b.const(np.zeros(2, np.int32)), size], [(4, 5)],
              options="SliceOptions")[0]
    b.output(y)
    inputs = [np.ones((4, 5), np.float32), np.array([4, 5], np.int32)]
    r = check_parity(b.build(), runtime, inputs, expect_cpu="all")
    assert "size" in r.reason(0) and "constant" in r.reason(0), r.reason(0)
