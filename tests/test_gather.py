"""GATHER with constant indices (src_cpp/ops/gather.cc: an index map whose axis reads through a
table, ops/strided_copy.h) against stock TFLite CPU: every axis, negative axes, repeated and
multi-dimensional int32/int64 indices, fp16 storage, chunks, and the nodes left to the CPU
(indices out of range, run-time indices, batch_dims)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tflite
from parity import check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

CASES: dict[str, tuple[tuple[int, ...], Any, int]] = {
    "rank1": ((7,), [6, 0, 3, 3], 0),
    "axis0_rows": ((5, 4), [4, 1], 0),
    "axis1": ((2, 6, 3), [5, 0, 2, 2, 1], 1),
    "last_axis": ((2, 3, 8), [7, 1, 4, 0], -1),
    "channels_2d_indices": ((1, 4, 5, 6), [[0, 5], [2, 2], [3, 1]], 3),
    "scalar_index": ((3, 4, 5), 2, 1),
    "inner_vec4": ((6, 3, 8), [5, 2, 0], 0),
}


def gather_model(case: str, index_dtype: Any = np.int32) -> bytes:
    shape, indices, axis = CASES[case]
    b = ModelBuilder(seed=1)
    x = b.input("x", shape)
    if index_dtype is np.int32:
        b.output(b.gather(x, indices, axis))
    else:
        idx = np.asarray(indices, index_dtype)
        ax = axis % len(shape)
        out = shape[:ax] + idx.shape + shape[ax + 1 :]
        b.output(
            b._op(
                tflite.BuiltinOperator.GATHER,
                [x, b.const(idx)],
                [out],
                options="GatherOptions",
                Axis=axis,
            )[0]
        )
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_gather_parity(case: str, runtime: str) -> None:
    check_parity(gather_model(case), runtime, expect_delegated="all")


def test_gather_int64_indices(runtime: str) -> None:
    check_parity(gather_model("axis1", np.int64), runtime, expect_delegated="all")


def test_gather_fp16_storage(runtime: str) -> None:
    check_parity(
        gather_model("channels_2d_indices"),
        runtime,
        rtol=1e-2,
        atol=1e-2,
        expect_delegated="all",
        precision="fp16",
    )


def test_gather_in_chunks(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.add(b.input("x", (1, 16, 16, 12)), 0.5)
    y = b.gather(x, [15, 3, 3, 0, 9, 12, 1, 14, 7, 2, 11, 5], axis=1)
    b.output(b.add(y, 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=4096)
    assert r.delegate.memory()["chunked_ops"] >= 1, r.delegate.memory()


def _decision(model: bytes, runtime: str) -> Any:
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(model, [d], runtime=runtime, reference=True)
    return d.decisions()[0]


@pytest.mark.parametrize("index", [-1, 5])
def test_index_out_of_range_stays_on_cpu(index: int, runtime: str) -> None:
    # TFLite's kernel fails on it; the CPU keeps the node and reports that error itself.
    b = ModelBuilder()
    b.output(b.gather(b.input("x", (5, 3)), [0, index], 0))
    d = _decision(b.build(), runtime)
    assert not d.delegated and "outside [0, 5)" in d.reason, d.reason


def test_batch_dims_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (2, 5, 3))
    idx = b.const(np.array([[0, 1], [4, 2]], np.int32))
    b.output(
        b._op(
            tflite.BuiltinOperator.GATHER,
            [x, idx],
            [(2, 2, 3)],
            options="GatherOptions",
            Axis=1,
            BatchDims=1,
        )[0]
    )
    r = check_parity(b.build(), runtime, expect_cpu="all")
    assert "batch_dims 1" in r.reason(0), r.reason(0)


def test_runtime_indices_run_on_the_device(runtime: str) -> None:
    # Positions from the model's input: the indexed gather (tests/test_gather_indexed.py).
    b = ModelBuilder()
    x = b.input("x", (5, 3))
    idx = b.input("idx", (2,), "int32")
    b.output(b._op(tflite.BuiltinOperator.GATHER, [x, idx], [(2, 3)], options="GatherOptions")[0])
    inputs = [np.ones((5, 3), np.float32), np.array([4, 0], np.int32)]
    r = check_parity(b.build(), runtime, inputs, expect_delegated="all")
    assert r.delegate.decisions()[0].delegated
