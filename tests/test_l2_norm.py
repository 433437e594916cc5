"""L2_NORMALIZATION over the last axis (src_cpp/ops/l2_norm.cc) against stock TFLite CPU: rows
shorter and longer than a work-group, rows of zeros and of values whose norm is below TFLite's
1e-6 floor, fp16 storage, and Swin V2's use (queries and keys normalized before their product)."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


def _model(shape: tuple[int, ...]) -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", shape)
    b.output(b.l2_normalization(x))
    return b.build()


@pytest.mark.parametrize("shape", [(7,), (3, 33), (2, 5, 64), (1, 4, 6, 96), (2, 3, 300)])
def test_l2_normalization(shape: tuple[int, ...], runtime: str) -> None:
    check_parity(_model(shape), runtime, expect_delegated="all", expect_partitions=1)


def test_rows_of_zeros_and_below_the_floor(runtime: str) -> None:
    # sum x^2 of 0 and of 1e-9-sized values: TFLite divides by its floor, 1e-6, not by the norm.
    x = np.random.default_rng(1).standard_normal((4, 10)).astype(np.float32)
    x[1] = 0.0
    x[2] *= 1e-9
    r = check_parity(_model((4, 10)), runtime, inputs=[x], expect_delegated="all")
    assert np.all(r.outputs[0][1] == 0)


def test_fp16_storage(runtime: str) -> None:
    check_parity(
        _model((2, 6, 48)), runtime, expect_delegated="all", precision="fp16", rtol=1e-2, atol=1e-2
    )


def test_cosine_attention_block_runs_whole(runtime: str) -> None:
    # Swin V2: q and k normalized, their product scaled, softmax, times v.
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 16, 24))
    q = b.l2_normalization(b.fully_connected(x, b.rand((24, 24)), keep_num_dims=True))
    k = b.l2_normalization(b.fully_connected(x, b.rand((24, 24)), keep_num_dims=True))
    v = b.fully_connected(x, b.rand((24, 24)), keep_num_dims=True)
    att = b.softmax(b.mul(b.batch_matmul(q, k, adj_y=True), np.array(10.0, np.float32)))
    b.output(b.batch_matmul(att, v))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
