"""SOFTMAX and LOG_SOFTMAX (src_cpp/ops/softmax.cc) against stock TFLite CPU: beta, ranks 1-4,
rows of 1 to 100000 (a work-item per short row, a work-group per long one), large logits, fp16
storage, chunks within a tiny largest allocation, and a classifier head in one partition."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


def softmax_model(shape: tuple[int, ...], beta: float | None) -> bytes:
    """SOFTMAX with `beta`, or LOG_SOFTMAX when beta is None."""
    b = ModelBuilder(seed=2)
    x = b.input("x", shape)
    b.output(b.log_softmax(x) if beta is None else b.softmax(x, beta))
    return b.build()


def _x(shape: tuple[int, ...], scale: float = 3.0, seed: int = 0) -> list[np.ndarray]:
    return [(np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)]


SHAPES = [(3, 1), (4, 7), (2, 1000), (2, 3, 5, 7), (1, 2, 3, 1000), (70,), (2, 5, 65)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("beta", [1.0, 0.5, None], ids=["beta1", "beta0.5", "log"])
def test_softmax_parity(shape: tuple[int, ...], beta: float | None, runtime: str) -> None:
    check_parity(softmax_model(shape, beta), runtime, _x(shape), expect_delegated="all")


@pytest.mark.parametrize("beta", [1.0, None], ids=["softmax", "log"])
def test_softmax_long_row(beta: float | None, runtime: str) -> None:
    shape = (1, 100000)
    r = check_parity(softmax_model(shape, beta), runtime, _x(shape), expect_delegated="all")
    if beta is not None:
        assert np.isclose(r.outputs[0].sum(), 1.0, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 9), (2, 300)], ids=["short", "long"])
def test_softmax_large_logits_do_not_overflow(shape: tuple[int, ...], runtime: str) -> None:
    # exp(500) overflows float: the max is subtracted first.
    x = _x(shape, scale=1.0)[0] + 500.0
    check_parity(softmax_model(shape, 1.0), runtime, [x], expect_delegated="all")
    check_parity(softmax_model(shape, None), runtime, [x], expect_delegated="all")


@pytest.mark.parametrize("shape", [(3, 10), (2, 4, 500)], ids=["short", "long"])
@pytest.mark.parametrize("beta", [1.0, None], ids=["softmax", "log"])
def test_softmax_fp16_storage(shape: tuple[int, ...], beta: float | None, runtime: str) -> None:
    check_parity(
        softmax_model(shape, beta),
        runtime,
        _x(shape, scale=1.0),
        rtol=1e-2,
        atol=1e-2,
        expect_delegated="all",
        precision="fp16",
    )


def test_softmax_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    # 3 KB buffers: the 8 KB tensor is kept in pieces and the op runs in chunks of whole rows.
    shape = (4, 8, 64)
    r = check_parity(
        softmax_model(shape, 1.0), runtime, _x(shape), expect_delegated="all", max_alloc_bytes=3072
    )
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_classifier_head_is_one_partition(runtime: str) -> None:
    # Global pool, FC, SOFTMAX: the whole head on the device.
    b = ModelBuilder(seed=7)
    x = b.input("x", (2, 5, 5, 16))
    y = b.mean(x, (1, 2))
    y = b.fully_connected(y, b.rand((10, 16)), b.rand((10,)))
    b.output(b.softmax(y))
    r = check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
    assert np.allclose(r.outputs[0].sum(axis=-1), 1.0, rtol=1e-5)
