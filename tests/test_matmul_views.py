"""TRANSPOSE / RESHAPE chains and a scale around BATCH_MATMUL folded into it as strided views
(src_cpp/ops/matmul_views.cc): attention's head split, scale and head merge run no kernel of
their own; chains that are no view, intermediates read elsewhere and fuse_add=false keep their
kernels; every case matches stock TFLite CPU."""

from __future__ import annotations

import numpy as np
from parity import check_parity, compare, random_inputs, run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def kernels(r) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(k.op for k in r.delegate.profile().kernels)


def attention_model(b: int = 1, s: int = 12, heads: int = 2, dh: int = 8) -> bytes:
    mb = ModelBuilder(seed=5)
    d = heads * dh
    x = mb.input("x", (b, s, d))
    w = [mb.rand((d, d), scale=d**-0.5) for _ in range(4)]
    mb.output(mb.attention(x, heads, *w))
    return mb.build()


def test_attention_runs_only_matmuls_softmax_and_projections(runtime: str) -> None:
    r = check_parity(attention_model(), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["BATCH_MATMUL"] * 2 + ["FULLY_CONNECTED"] * 4 + ["SOFTMAX"]
    assert {k.algorithm for k in r.delegate.profile().kernels if k.op == "BATCH_MATMUL"} == {
        "gemm_batched+views"
    }


def test_attention_fp16_storage(runtime: str) -> None:
    check_parity(
        attention_model(s=17, heads=3, dh=5),
        runtime,
        expect_delegated="all",
        precision="fp16",
        rtol=1e-2,
        atol=1e-2,
    )


def test_attention_without_fusion_runs_every_node(runtime: str) -> None:
    r = check_parity(
        attention_model(), runtime, expect_delegated="all", profiling=True, fuse_add=False
    )
    assert kernels(r).count("TRANSPOSE") == 4 and "MUL" in kernels(r)


def test_attention_views_follow_a_resized_batch(runtime: str) -> None:
    model = attention_model(b=1, s=9)
    it = check_parity(model, runtime, expect_delegated="all").interpreter
    for batch in (3, 2):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for i in (ref, it):
            i.resize_tensor_input(i.get_input_details()[0]["index"], (batch, 9, 16))
            i.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), batch)
        compare(run(it, inputs), run(ref, inputs), 1e-4, None, f" (batch {batch})")


def test_chain_that_is_no_view_keeps_its_transpose(runtime: str) -> None:
    # TRANSPOSE (2, 3, 4) -> (3, 2, 4), then RESHAPE (6, 4): axes 0 and 1 are not adjacent in
    # memory any more, so no strides address the matmul's operand; the TRANSPOSE runs.
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 3, 4))
    t = b.reshape(b.transpose(x, (1, 0, 2)), (6, 4))
    b.output(b.batch_matmul(t, b.input("y", (4, 5))))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert "TRANSPOSE" in kernels(r)


def test_reshape_before_transpose_and_adj(runtime: str) -> None:
    # y^T as a view: RESHAPE of a flat tensor, TRANSPOSE of its last axes, then adj_y.
    b = ModelBuilder(seed=7)
    x = b.input("x", (3, 5, 6))
    y = b.transpose(b.reshape(b.input("y", (3, 42)), (3, 6, 7)), (0, 2, 1))
    b.output(b.batch_matmul(x, y, adj_y=True))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["BATCH_MATMUL"]


def test_transposed_constant_operand(runtime: str) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (2, 4, 9))
    w = b.transpose(b.const(b.rand((2, 7, 9))), (0, 2, 1))
    b.output(b.batch_matmul(x, w))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["BATCH_MATMUL"]


def test_output_chain_with_a_scale_and_head_merge(runtime: str) -> None:
    # (b, h, s, d) -> scale -> TRANSPOSE (b, s, h, d) -> RESHAPE (b, s, h * d): written in place.
    b = ModelBuilder(seed=9)
    x, y = b.input("x", (2, 3, 5, 4)), b.input("y", (2, 3, 4, 6))
    o = b.mul(b.batch_matmul(x, y), np.array(-0.75, np.float32))
    b.output(b.reshape(b.transpose(o, (0, 2, 1, 3)), (2, 5, 18)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["BATCH_MATMUL"]


def test_intermediate_read_elsewhere_is_not_folded(runtime: str) -> None:
    # The TRANSPOSE's output is also a graph output: it must be written, so it runs.
    b = ModelBuilder(seed=10)
    x = b.input("x", (2, 4, 3))
    t = b.transpose(x, (0, 2, 1))
    b.output(b.batch_matmul(t, b.input("y", (2, 4, 5))))
    b.output(t)
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert "TRANSPOSE" in kernels(r)


def test_broadcast_scale_is_not_a_scale(runtime: str) -> None:
    # MUL by a (1, 1, 1, 1) constant would add an axis to a rank-3 product: it runs as a MUL.
    b = ModelBuilder(seed=12)
    x, y = b.input("x", (2, 3, 4)), b.input("y", (2, 4, 5))
    b.output(b.mul(b.batch_matmul(x, y), np.full((1, 1, 1, 1), 2.0, np.float32)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert "MUL" in kernels(r)


def test_views_with_tensors_in_pieces(runtime: str) -> None:
    # Tensors larger than one buffer are kept in pieces: no view reads them, the chain's nodes
    # run and the matmuls run in chunks; the result holds.
    r = check_parity(
        attention_model(s=12, heads=2, dh=8),
        runtime,
        expect_delegated="all",
        max_alloc_bytes=512,
        profiling=True,
    )
    assert "TRANSPOSE" in kernels(r) and r.delegate.memory()["chunked_ops"] >= 2
