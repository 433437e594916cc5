"""STRIDED_SLICE (src_cpp/ops/strided_slice.cc, an index map of ops/strided_copy.h) against stock
TFLite CPU: ranks 1 to 5, every mask, negative and clamped indices, negative strides, `offset`,
fp16 storage, a contiguous slice as a flat copy, chunks under a small largest allocation, and the
nodes TFLite's kernel would not run exactly left on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tflite
from parity import check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# name: (input shape, begin, end, strides, keyword arguments)
CASES: dict[str, tuple[tuple[int, ...], list[int], list[int], list[int], dict[str, Any]]] = {
    "rank1_step3": ((10,), [2], [9], [3], {}),
    "rank1_reversed": ((10,), [-1], [0], [-1], {"end_mask": 1}),
    "rank2_end_mask": ((5, 7), [1, 0], [4, 0], [1, 2], {"end_mask": 2}),
    "rank3_negative": ((4, 5, 6), [-1, 0, 5], [0, 5, 0], [-1, 2, -2], {"end_mask": 1}),
    "rank4_channels": ((1, 6, 7, 10), [0, 0, 0, 2], [1, 6, 7, 8], [1, 1, 1, 1], {}),
    "rank4_channels_vec4": ((1, 5, 6, 16), [0, 0, 0, 4], [0, 0, 0, 12], [1, 1, 1, 1],
                            {"begin_mask": 7, "end_mask": 7}),
    "rank4_spatial_step2": ((2, 9, 8, 3), [0, 1, 0, 0], [2, 9, 8, 3], [1, 2, 2, 1], {}),
    "rank5": ((2, 3, 4, 5, 6), [0, 1, 0, 1, 0], [2, 3, 4, 5, 6], [1, 1, 2, 2, 3], {}),
    "shrink": ((3, 4, 5), [1, 0, 2], [2, 4, 3], [1, 1, 1], {"shrink_axis_mask": 5}),
    "shrink_negative_index": ((3, 4, 5), [-1, 0, 0], [0, 0, 0], [1, 1, 1],
                              {"shrink_axis_mask": 1, "end_mask": 6}),
    "shrink_all": ((3, 4), [2, 1], [3, 2], [1, 1], {"shrink_axis_mask": 3}),
    "ellipsis_first": ((2, 3, 4, 5), [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1}),
    "ellipsis_middle": ((2, 3, 4, 5), [1, 0, 0], [2, 0, 4], [1, 1, 2], {"ellipsis_mask": 2}),
    "new_axis": ((3, 4), [0, 0, 1], [0, 3, 4], [1, 1, 1], {"new_axis_mask": 1}),
    "new_axis_and_shrink": ((3, 4, 5), [1, 0, 0, 0], [2, 0, 4, 5], [1, 1, 1, 1],
                            {"new_axis_mask": 2, "shrink_axis_mask": 1}),
    "offset": ((2, 3, 4, 5), [0, 1, 1, 0], [2, 2, 2, 3], [1, 1, 1, 1], {"offset": True}),
    "clamped": ((4, 6), [-10, 2], [10, 100], [1, 1], {}),
    "fewer_specs": ((3, 4, 5), [1], [3], [1], {}),
    "empty": ((4, 6), [3, 0], [1, 6], [1, 1], {}),
}


def slice_model(case: str, seed: int = 1) -> bytes:
    shape, begin, end, strides, kw = CASES[case]
    b = ModelBuilder(seed=seed)
    b.output(b.strided_slice(b.input("x", shape), begin, end, strides, **kw))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_strided_slice_parity(case: str, runtime: str) -> None:
    check_parity(slice_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("case", ["rank3_negative", "rank4_channels_vec4", "ellipsis_middle"])
def test_strided_slice_fp16_storage(case: str, runtime: str) -> None:
    check_parity(slice_model(case), runtime, rtol=1e-2, atol=1e-2, expect_delegated="all",
                 precision="fp16")


def test_contiguous_slice_is_a_flat_copy(runtime: str) -> None:
    # Rows 2..4 of a [1, 8, 6, 3] tensor are one range of it: a buffer copy, no kernel.
    b = ModelBuilder(seed=2)
    x = b.relu(b.input("x", (1, 8, 6, 3)))
    b.output(b.relu(b.strided_slice(x, [0, 2, 0, 0], [1, 5, 6, 3])))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    kernels = {k.kernel for k in r.delegate.profile().kernels if k.op == "STRIDED_SLICE"}
    assert kernels == {"copy"}, kernels


def test_strided_slice_in_chunks(runtime: str) -> None:
    # Every tensor is larger than the 4 KB allocation: kept in pieces, the slice runs in chunks.
    b = ModelBuilder(seed=3)
    x = b.add(b.input("x", (1, 24, 20, 8)), 0.5)
    y = b.strided_slice(x, [0, 23, 1, 0], [1, 0, 20, 8], [1, -2, 1, 1], end_mask=1)
    b.output(b.add(y, 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=4096)
    mem = r.delegate.memory()
    assert mem["chunked_ops"] >= 1 and mem["split_tensors"] >= 2, mem


def _decisions(model: bytes, runtime: str) -> list[Any]:
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(model, [d], runtime=runtime, reference=True)
    return list(d.decisions())


def test_shrunk_axis_walked_backwards_stays_on_cpu(runtime: str) -> None:
    # TFLite's kernel writes no element for it (the output is left uninitialised): not claimed.
    b = ModelBuilder()
    b.output(b.strided_slice(b.input("x", (3, 4)), [1, 0], [2, 4], [-1, 1], shrink_axis_mask=1))
    (d,) = _decisions(b.build(), runtime)
    assert not d.delegated and "negative stride" in d.reason, d.reason


def test_runtime_begin_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (4, 5))
    begin = b.input("begin", (2,), "int32")
    end, strides = b.const(np.array([4, 5], np.int32)), b.const(np.array([1, 1], np.int32))
    y = b._op(tflite.BuiltinOperator.STRIDED_SLICE, [x, begin, end, strides], [(4, 5)],
              options="StridedSliceOptions")[0]
    b.output(y)
    inputs = [np.ones((4, 5), np.float32), np.array([1, 2], np.int32)]
    r = check_parity(b.build(), runtime, inputs, expect_cpu="all")
    assert "begin" in r.reason(0) and "constant" in r.reason(0), r.reason(0)


def test_wrong_declared_shape_stays_on_cpu(runtime: str) -> None:
    # The model's declared output disagrees with the slice: claimed output shapes come from our
    # own resolution, so such a node is left to the runtime.
    b = ModelBuilder()
    b.output(b.strided_slice(b.input("x", (4, 5)), [1, 0], [3, 5], out_shape=(3, 5)))
    r = check_parity(b.build(), runtime, expect_cpu="all")
    assert "declares output" in r.reason(0), r.reason(0)


def test_params_read_in_both_runtimes(runtime: str) -> None:
    # The masks and `offset` at their TfLiteStridedSliceParams offsets, as each runtime fills them.
    b = ModelBuilder()
    x = b.input("x", (2, 3, 4, 5))
    b.output(b.strided_slice(x, [0, 1, 1, 0], [2, 2, 2, 3], offset=True))
    b.output(b.strided_slice(x, [1, 0, 0, 0], [2, 0, 4, 5], new_axis_mask=2, shrink_axis_mask=1,
                             begin_mask=8, end_mask=8))
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    read = sorted(line.split(" ", 3)[3] for line in d.abi().params_read)
    assert read == [
        "begin_mask=0 end_mask=0 ellipsis_mask=0 new_axis_mask=0 shrink_axis_mask=0 offset=1",
        "begin_mask=8 end_mask=8 ellipsis_mask=0 new_axis_mask=2 shrink_axis_mask=1 offset=0",
    ], read


def test_offset_past_the_end_stays_on_cpu(runtime: str) -> None:
    # TFLite sizes an offset slice from `end` alone but copies only what the axis holds.
    b = ModelBuilder()
    b.output(b.strided_slice(b.input("x", (4, 5)), [2, 0], [3, 5], offset=True, out_shape=(3, 5)))
    (d,) = _decisions(b.build(), runtime)
    assert not d.delegated and "offset slice past the end" in d.reason, d.reason
