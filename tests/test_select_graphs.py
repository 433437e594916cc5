"""The data-movement ops (STRIDED_SLICE, SLICE, GATHER, PACK, UNPACK, DEPTH_TO_SPACE,
SPACE_TO_DEPTH) and sparse weights (DENSIFY) inside graphs with the fused patterns next to them:
a clamp and a swish folded into the conv before a slice, a residual ADD whose other operand is a
slice, a decoder upsampling by DEPTH_TO_SPACE. One partition, stock TFLite CPU's values, with
fusion on and off (option fuse_add) and that many fewer launches."""

from __future__ import annotations

import numpy as np
import pytest
from folds import launches as _launches
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


def mixed_model(fp16_weights: bool) -> tuple[bytes, int]:
    """The model and how many launches fusion saves."""
    rng = np.random.default_rng(7)
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 12, 12, 8))
    # conv + RELU (a clamp fold), then a channel slice and a spatial crop of its output.
    y = b.relu(b.conv2d(x, b.rand((16, 3, 3, 8)), b.rand((16,))))
    y = b.strided_slice(y, [0, 0, 0, 4], [1, 12, 12, 12])  # 8 channels
    # A residual ADD folded into the conv producing its first operand; the other is a SLICE.
    skip = b.slice(x, [0, 0, 0, 0], [1, 12, 12, 8])
    w = rng.standard_normal((8, 1, 1, 8)).astype(np.float32)
    w[rng.random(w.shape) < 0.5] = 0.0
    y = b.add(b.conv2d(y, b.sparse_const(w, fp16=fp16_weights), b.rand((8,))), skip, "RELU")
    # SPACE_TO_DEPTH, a conv with a swish epilogue (LOGISTIC + MUL fold), DEPTH_TO_SPACE.
    z = b.conv2d(b.space_to_depth(y, 2), b.rand((32, 1, 1, 32)), b.rand((32,)))
    z = b.mul(z, b.logistic(z))
    z = b.depth_to_space(z, 2)  # (1, 12, 12, 8)
    # Channels reordered by GATHER, split by UNPACK along H and stacked back by PACK.
    z = b.gather(z, [7, 6, 5, 4, 3, 2, 1, 0], axis=3)
    rows = b.unpack(b.strided_slice(z, [0, 0, 0, 0], [1, 12, 12, 8], [1, 3, 1, 1]), 1)
    b.output(b.pack(rows[::-1], 1))
    return b.build(), 4  # RELU, the residual ADD, and LOGISTIC + MUL


@pytest.mark.parametrize("fp16_weights", [False, True], ids=["fp32_weights", "fp16_weights"])
def test_data_movement_next_to_fusions(fp16_weights: bool, runtime: str) -> None:
    model, saved = mixed_model(fp16_weights)
    common = {"expect_delegated": "all", "expect_partitions": 1, "profiling": True}
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, **common, fuse_add=False)
    assert _launches(on) == _launches(off) - saved, on.delegate.profile().table()


def test_data_movement_next_to_fusions_fp16_storage(runtime: str) -> None:
    model, _ = mixed_model(True)
    check_parity(model, runtime, rtol=1e-2, atol=3e-2, expect_delegated="all",
                 expect_partitions=1, precision="fp16")


def test_data_movement_next_to_fusions_in_chunks(runtime: str) -> None:
    model, _ = mixed_model(False)
    r = check_parity(model, runtime, expect_delegated="all", expect_partitions=1,
                     max_alloc_bytes=2048)
    assert r.delegate.memory()["chunked_ops"] >= 4, r.delegate.memory()
