"""UNPACK (src_cpp/ops/unpack.cc: one index map per output, ops/strided_copy.h) against stock
TFLite CPU: every axis, fp16 storage, and the outermost axis as flat copies (no kernel)."""

from __future__ import annotations

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "rank1": ((4,), 0),
    "rank2_axis1": ((3, 5), 1),
    "rank3_axis_last": ((2, 3, 4), -1),
    "rank4_axis1": ((2, 3, 5, 8), 1),
    "rank4_axis3": ((1, 4, 5, 3), 3),
    "one": ((2, 1, 3), 1),
}


def unpack_model(case: str) -> bytes:
    shape, axis = CASES[case]
    b = ModelBuilder(seed=1)
    for y in b.unpack(b.input("x", shape), axis):
        b.output(y)
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_unpack_parity(case: str, runtime: str) -> None:
    check_parity(unpack_model(case), runtime, expect_delegated="all")


def test_unpack_fp16_storage(runtime: str) -> None:
    check_parity(unpack_model("rank4_axis1"), runtime, rtol=1e-2, atol=1e-2,
                 expect_delegated="all", precision="fp16")


def test_unpack_of_the_outermost_axis_is_flat_copies(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    for y in b.unpack(b.relu(b.input("x", (1, 3, 4, 5))), 1):
        b.output(b.relu(y))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    kernels = [k for k in r.delegate.profile().kernels if k.op == "UNPACK"]
    assert {k.kernel for k in kernels} == {"copy"}, kernels


def test_unpack_of_large_tensors_copies_pieces(runtime: str) -> None:
    # The outermost axis: its ranges are copied piece by piece, no chunks needed.
    b = ModelBuilder(seed=3)
    for y in b.unpack(b.add(b.input("x", (3, 16, 40)), 0.5), 0):
        b.output(b.add(y, 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=1024)
    assert r.delegate.memory()["split_tensors"] >= 4, r.delegate.memory()


def test_unpack_of_a_large_inner_axis_stays_on_cpu(runtime: str) -> None:
    # Several outputs cannot run in chunks (chunks are boxes of one output): refused, with why.
    b = ModelBuilder(seed=4)
    for y in b.unpack(b.add(b.input("x", (16, 3, 40)), 0.5), 1):
        b.output(b.add(y, 1.0))
    r = check_parity(b.build(), runtime, expect_cpu={1}, max_alloc_bytes=1024)
    assert "cannot run in chunks" in r.reason(1), r.reason(1)


def test_unpack_from_graph_input_to_graph_outputs(runtime: str, transfer: dict) -> None:
    # Flat copies straight between boundary tensors, under every transfer mode.
    b = ModelBuilder(seed=5)
    x = b.input("x", (3, 4, 5))
    for y in b.unpack(x, 0):
        b.output(y)
    b.output(b.relu(x))
    check_parity(b.build(), runtime, expect_delegated="all", atol=0.0, rtol=0.0, **transfer)
