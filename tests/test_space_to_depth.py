"""SPACE_TO_DEPTH (src_cpp/ops/space_to_depth.cc, an index map over 6-D views) against stock
TFLite CPU: block sizes 2 to 4, batches, fp16 storage, chunks, and the inverse of
DEPTH_TO_SPACE."""

from __future__ import annotations

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "block2": ((1, 4, 6, 3), 2),
    "block2_vec4": ((1, 4, 4, 8), 2),
    "block3_batch2": ((2, 6, 3, 2), 3),
    "block4": ((1, 8, 4, 1), 4),
}


def s2d_model(case: str) -> bytes:
    shape, block = CASES[case]
    b = ModelBuilder(seed=1)
    b.output(b.space_to_depth(b.input("x", shape), block))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_space_to_depth_parity(case: str, runtime: str) -> None:
    check_parity(s2d_model(case), runtime, expect_delegated="all")


def test_space_to_depth_fp16_storage(runtime: str) -> None:
    check_parity(s2d_model("block3_batch2"), runtime, rtol=1e-2, atol=1e-2,
                 expect_delegated="all", precision="fp16")


def test_space_to_depth_in_chunks(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    x = b.add(b.input("x", (1, 16, 16, 8)), 0.5)
    b.output(b.add(b.space_to_depth(x, 2), 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=4096)
    assert r.delegate.memory()["chunked_ops"] >= 1, r.delegate.memory()


def test_round_trip_is_exact(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 6, 4, 5))
    b.output(b.depth_to_space(b.space_to_depth(x, 2), 2))
    r = check_parity(b.build(), runtime, expect_delegated="all", rtol=0.0, atol=0.0)
    assert (r.outputs[0] == r.inputs[0]).all()
