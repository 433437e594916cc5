"""PACK (src_cpp/ops/pack.cc: CONCATENATION's copy with each input seen with a unit axis) against
stock TFLite CPU: every axis, 1 to 11 inputs (more than one launch takes), fp16 storage, a
single input as a flat copy, infinities copied as they are, and chunks."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

CASES = {
    "rank1_axis0": ((5,), 3, 0),
    "rank1_axis1": ((5,), 2, 1),
    "rank3_axis_last": ((2, 3, 4), 4, -1),
    "rank4_axis1": ((1, 6, 5, 4), 3, 1),
    "rank4_axis3_odd": ((2, 3, 5, 3), 2, 3),
    "scalars": ((), 4, 0),
    "eleven": ((3, 4), 11, 1),
}


def pack_model(case: str) -> bytes:
    shape, n, axis = CASES[case]
    b = ModelBuilder(seed=1)
    xs = [b.input(f"x{i}", shape) for i in range(n)]
    b.output(b.pack(xs, axis))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_pack_parity(case: str, runtime: str) -> None:
    check_parity(pack_model(case), runtime, expect_delegated="all")


def test_pack_fp16_storage(runtime: str) -> None:
    check_parity(pack_model("rank4_axis1"), runtime, rtol=1e-2, atol=1e-2, expect_delegated="all",
                 precision="fp16")


def test_pack_of_one_is_a_flat_copy(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    b.output(b.relu(b.pack([b.relu(b.input("x", (3, 4, 5)))], axis=2)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    kernels = {k.kernel for k in r.delegate.profile().kernels if k.op == "PACK"}
    assert kernels == {"copy"}, kernels


def test_pack_copies_infinities(runtime: str) -> None:
    # TFLite's PACK copies: an infinity stays one (CONCATENATION's NONE clamp would not).
    b = ModelBuilder()
    b.output(b.pack([b.input("a", (2, 3)), b.input("b", (2, 3))], 1))
    model = b.build()
    a = np.array([[np.inf, -np.inf, 1.0], [2.0, 3.0, -4.0]], np.float32)
    d = clgpu_delegate.load(partitioning="all")
    interps = [make_interpreter(model, ds, runtime=runtime, reference=True) for ds in ([d], None)]
    for it in interps:
        it.allocate_tensors()
    got, want = (run(it, [a, -a]) for it in interps)
    assert d.delegated_nodes() == [0]
    np.testing.assert_array_equal(got[0], want[0])
    assert np.isinf(got[0]).sum() == 4


def test_pack_in_chunks(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    xs = [b.add(b.input(f"x{i}", (1, 12, 12, 8)), 0.5) for i in range(3)]
    b.output(b.add(b.pack(xs, axis=3), 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=4096)
    assert r.delegate.memory()["chunked_ops"] >= 1, r.delegate.memory()
