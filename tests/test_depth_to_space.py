"""DEPTH_TO_SPACE (src_cpp/ops/depth_to_space.cc, an index map over 6-D views) against stock
TFLite CPU: block sizes 2 to 4, batches, channel counts with and without float4 runs, fp16
storage, chunks, and MediaPipe pose_detection's use (a conv, then DEPTH_TO_SPACE, then an ADD)."""

from __future__ import annotations

import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "block2": ((1, 3, 4, 8), 2),
    "block2_wide": ((1, 7, 7, 1152), 2),
    "block3_batch2": ((2, 3, 2, 18), 3),
    "block4_one_channel": ((1, 2, 3, 16), 4),
    "block2_odd": ((1, 5, 3, 12), 2),
}


def d2s_model(case: str) -> bytes:
    shape, block = CASES[case]
    b = ModelBuilder(seed=1)
    b.output(b.depth_to_space(b.input("x", shape), block))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_depth_to_space_parity(case: str, runtime: str) -> None:
    check_parity(d2s_model(case), runtime, expect_delegated="all")


def test_depth_to_space_fp16_storage(runtime: str) -> None:
    check_parity(d2s_model("block3_batch2"), runtime, rtol=1e-2, atol=1e-2,
                 expect_delegated="all", precision="fp16")


def test_depth_to_space_in_chunks(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    x = b.add(b.input("x", (1, 8, 8, 32)), 0.5)
    b.output(b.add(b.depth_to_space(x, 2), 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", max_alloc_bytes=4096)
    assert r.delegate.memory()["chunked_ops"] >= 1, r.delegate.memory()


def test_pose_detection_upsampling_is_one_partition(runtime: str) -> None:
    # pose_detection's decoder: conv to 4x channels, DEPTH_TO_SPACE(2), ADD of the skip branch.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 8, 6))
    skip = b.conv2d(x, b.rand((4, 1, 1, 6)), activation="RELU")
    y = b.conv2d(x, b.rand((16, 3, 3, 6)), stride=2, activation="RELU")
    y = b.depth_to_space(y, 2)
    b.output(b.add(y, skip))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
