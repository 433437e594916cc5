"""BATCH_MATMUL (src_cpp/ops/batch_matmul.cc) against stock TFLite CPU: adj_x / adj_y, batch
axes broadcast, ranks 2 to 5, either operand a constant (float32 or fp16 behind DEQUANTIZE),
odd sizes and whole tiles (every read mode of kernels/batch_matmul.cl), fp16 storage, empty
batches, and a resize of the batch."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class MM(NamedTuple):
    x: tuple[int, ...]
    y: tuple[int, ...]
    adj_x: bool = False
    adj_y: bool = False


CASES = {
    "2d": MM((5, 7), (7, 3)),
    "3d": MM((2, 5, 7), (2, 7, 4)),
    "4d_heads": MM((1, 4, 33, 64), (1, 4, 64, 40)),  # float4 reads along K and N
    "adj_x": MM((2, 8, 5), (2, 8, 6), adj_x=True),  # float4 reads along M
    "adj_y": MM((3, 16, 12), (3, 20, 12), adj_y=True),  # B read as [N][K], like FC weights
    "adj_both": MM((2, 9, 6), (2, 5, 9), adj_x=True, adj_y=True),
    "broadcast_rank": MM((3, 5, 7), (7, 4)),
    "broadcast_ones": MM((2, 1, 5, 8), (3, 8, 4)),
    "broadcast_lhs": MM((6, 5), (2, 3, 5, 4)),
    "rank5": MM((1, 2, 3, 9, 8), (3, 8, 12)),
    "whole_tiles": MM((2, 64, 32), (2, 32, 64)),
    "k1": MM((4, 6, 1), (4, 1, 5)),
    "m1_n1": MM((3, 1, 17), (3, 17, 1)),
}


def mm_model(case: MM, const_y: bool = False, fp16_y: bool = False) -> bytes:
    b = ModelBuilder(seed=11)
    x = b.input("x", case.x)
    if fp16_y:
        y = b._weights(b.rand(case.y, scale=0.5), len(case.y), True, "y")
    elif const_y:
        y = b.const(b.rand(case.y, scale=0.5))
    else:
        y = b.input("y", case.y)
    b.output(b.batch_matmul(x, y, case.adj_x, case.adj_y))
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_batch_matmul_parity(case: MM, runtime: str) -> None:
    check_parity(mm_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("case", ["3d", "adj_y", "broadcast_rank", "broadcast_ones"])
def test_batch_matmul_fp16_storage(case: str, runtime: str) -> None:
    check_parity(
        mm_model(CASES[case]),
        runtime,
        rtol=1e-2,
        atol=1e-2,
        expect_delegated="all",
        precision="fp16",
    )


@pytest.mark.parametrize("kind", ["const", "fp16_const"])
@pytest.mark.parametrize("case", ["2d", "broadcast_rank", "adj_y"])
def test_batch_matmul_constant_operand(case: str, kind: str, runtime: str) -> None:
    # A constant operand is uploaded once and read like an activation; an fp16 one is a
    # folded DEQUANTIZE.
    model = mm_model(CASES[case], const_y=True, fp16_y=kind == "fp16_const")
    check_parity(model, runtime, expect_delegated="all", expect_partitions=1)


def test_batch_matmul_empty_batch(runtime: str) -> None:
    check_parity(mm_model(MM((0, 3, 4), (0, 4, 5))), runtime, expect_delegated="all")


def test_batch_matmul_follows_a_resized_batch(runtime: str) -> None:
    model = mm_model(MM((2, 5, 7), (7, 3)))
    d_interp = check_parity(model, runtime, expect_delegated="all").interpreter
    for batch in (4, 1):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for it in (ref, d_interp):
            it.resize_tensor_input(it.get_input_details()[0]["index"], (batch, 5, 7))
            it.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), batch)
        got = run(d_interp, inputs)
        assert got[0].shape == (batch, 5, 3)
        compare(got, run(ref, inputs), 1e-4, None, f" (batch {batch})")


def test_batch_matmul_of_mismatched_k_stays_on_cpu(runtime: str) -> None:
    # A hostile model (K 4 against 6): TFLite's CPU kernel refuses it at prepare, so must we.
    b = ModelBuilder(seed=3)
    x, y = b.input("x", (2, 3, 4)), b.input("y", (2, 4, 5))
    b.output(b.batch_matmul(x, y))
    b._tensors[y].shape = (2, 6, 5)
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    assert not d.delegated_nodes()
    assert "disagree on K" in d.decisions()[0].reason
    with pytest.raises(RuntimeError):
        it.allocate_tensors()


def test_batch_matmul_values(runtime: str) -> None:
    # Against numpy as well: integers, so every sum is exact in float.
    case = MM((2, 3, 6, 5), (3, 5, 7))
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, case.x).astype(np.float32)
    y = rng.integers(-3, 4, case.y).astype(np.float32)
    r = check_parity(mm_model(case), runtime, [x, y], expect_delegated="all", rtol=0, atol=0)
    np.testing.assert_array_equal(r.outputs[0], np.matmul(x, y))


@pytest.mark.parametrize(("case", "limit"), [("3d", 256), ("adj_x", 256),
                                             ("broadcast_ones", 256), ("rank5", 512)])
def test_batch_matmul_in_chunks_within_a_tiny_allocation(case: str, limit: int,
                                                         runtime: str) -> None:
    # Buffers of a few hundred bytes: tensors in pieces, the product in boxes of batch and rows.
    r = check_parity(mm_model(CASES[case]), runtime, expect_delegated="all", max_alloc_bytes=limit)
    assert r.delegate.memory()["chunked_ops"] >= 1
