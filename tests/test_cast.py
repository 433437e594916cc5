"""CAST of run-time int32 values to float, and int32 RESHAPEs, on the device, against stock TFLite
CPU: litert-torch's BERT encoder takes its token ids and attention mask as int32 inputs, reshapes
the ids for its EMBEDDING_LOOKUP and casts the mask to float for the additive mask, which kept
both nodes on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

TOKENS, VOCAB, WIDTH = 8, 40, 16


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cast_of_int32_values(precision: str, runtime: str) -> None:
    b = ModelBuilder(seed=1)
    m = b.input("m", (2, 3, 5), dtype="int32")
    b.output(b.mul(b.cast(m), b.rand((3, 5))))
    rng = np.random.default_rng(0)
    if precision == "fp32":
        # Past 2^24 an int32 has no float of its own: rounded to nearest, ties to even, as the
        # CPU kernel's static_cast.
        v = rng.integers(-(2**31), 2**31 - 1, (2, 3, 5), dtype=np.int64)
        v.flat[:4] = [2**24 + 1, 2**24 + 3, -(2**31), 2**31 - 1]
        check_parity(
            b.build(), runtime, inputs=[v.astype(np.int32)], expect_delegated="all", rtol=0, atol=0
        )
    else:
        v = rng.integers(-1000, 1000, (2, 3, 5)).astype(np.int32)
        check_parity(
            b.build(),
            runtime,
            inputs=[v],
            expect_delegated="all",
            precision="fp16",
            rtol=1e-3,
            atol=1e-2,
        )


def test_cast_of_another_type_stays_on_the_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    m = b.input("m", (4, 6), dtype="int64")
    b.output(b.add(b.cast(m), b.rand((4, 6))))
    v = np.arange(24, dtype=np.int64).reshape(4, 6) - 12
    r = check_parity(b.build(), runtime, inputs=[v], expect_cpu={0}, expect_delegated={1})
    assert "only a CAST of int32" in r.reason(0)


def encoder_inputs() -> bytes:
    """BERT's first layers as litert-torch writes them: ids [1, T] reshaped to [T] for the
    embedding, the mask [1, T] reshaped, cast and turned into (1 - mask) * -10000 added to the
    scores of each token."""
    b = ModelBuilder(seed=3)
    ids = b.reshape(b.input("ids", (1, TOKENS), dtype="int32"), (TOKENS,))
    mask = b.input("mask", (1, TOKENS), dtype="int32")
    x = b.embedding_lookup(ids, b.rand((VOCAB, WIDTH), scale=1.0))
    q = b.fully_connected(x, b.rand((WIDTH, WIDTH)))
    scores = b.batch_matmul(b.reshape(q, (1, TOKENS, WIDTH)), b.reshape(x, (1, WIDTH, TOKENS)))
    m = b.cast(b.reshape(mask, (1, 1, TOKENS)))
    scores = b.add(scores, b.mul(b.sub(1.0, m), -10000.0))
    b.output(b.softmax(scores))
    return b.build()


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, (1, TOKENS)).astype(np.int32)
    mask = (np.arange(TOKENS) < rng.integers(2, TOKENS)).astype(np.int32).reshape(1, TOKENS)
    return [ids, mask]


def test_ids_and_mask_run_on_the_device(runtime: str) -> None:
    check_parity(
        encoder_inputs(), runtime, inputs=_inputs(0), expect_delegated="all", expect_partitions=1
    )


def test_an_int32_reshape_as_a_model_output(runtime: str) -> None:
    # The integers leave the device as they are.
    b = ModelBuilder(seed=4)
    ids = b.input("ids", (2, 6), dtype="int32")
    b.output(b.reshape(ids, (3, 4)))
    b.output(b.embedding_lookup(b.reshape(ids, (12,)), b.rand((VOCAB, WIDTH))))
    v = np.random.default_rng(1).integers(0, VOCAB, (2, 6)).astype(np.int32)
    r = check_parity(b.build(), runtime, inputs=[v], expect_delegated="all", rtol=0, atol=0)
    assert r.outputs[0].dtype == np.int32
    np.testing.assert_array_equal(r.outputs[0], v.reshape(3, 4))
