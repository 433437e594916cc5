"""A Keras transformer encoder layer as TF's converter writes it (clgpu_delegate.modelgen's
encoder_block: attention with BATCH_MATMUL, layer norms, a Dense(gelu) MLP through run-time
shapes, residuals), whole on the device in one partition and in few launches, against stock
TFLite CPU: fp32 and fp16 storage, beta or not, two layers, a resized batch."""

from __future__ import annotations

import pytest
from parity import check_parity, compare, random_inputs, run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def encoder_model(layers: int = 1, seq: int = 12, dim: int = 16, heads: int = 2,
                  beta: bool = False, batch: int = 1) -> bytes:
    b = ModelBuilder(seed=21)
    x = b.input("x", (batch, seq, dim))
    for _ in range(layers):
        x = b.encoder_block(x, heads=heads, mlp=2, beta=beta)
    b.output(x)
    return b.build()


def commands(r) -> int:  # type: ignore[no-untyped-def]
    return sum(p.kernels_per_invoke for p in r.delegate.profile().partitions)


@pytest.mark.parametrize("beta", [False, True], ids=["no_beta", "beta"])
def test_encoder_layer_is_one_partition_of_eleven_launches(beta: bool, runtime: str) -> None:
    # 6 FULLY_CONNECTED (q, k, v, out, MLP in with GELU, MLP out), 2 BATCH_MATMUL (head split,
    # scale and merge folded in), 1 SOFTMAX, 2 LAYER_NORM (each with its residual ADD).
    r = check_parity(encoder_model(beta=beta), runtime, expect_delegated="all",
                     expect_partitions=1, profiling=True)
    ops = sorted(k.op for k in r.delegate.profile().kernels)
    assert ops == sorted(["FULLY_CONNECTED"] * 6 + ["BATCH_MATMUL"] * 2 + ["SOFTMAX"] +
                         ["LAYER_NORM"] * 2)
    assert commands(r) == 11


def test_encoder_layer_node_by_node(runtime: str) -> None:
    # Without the rewrites every node runs, RESHAPEs aside (they still share storage): 6 FCs,
    # GELU, 2 matmuls, 4 TRANSPOSEs, the scale, SOFTMAX, 2 residual ADDs, 2 x 10 for the norms.
    r = check_parity(encoder_model(), runtime, expect_delegated="all", profiling=True,
                     fuse_add=False)
    assert commands(r) == 37


def test_two_encoder_layers_fp16_storage(runtime: str) -> None:
    check_parity(encoder_model(layers=2, seq=9, heads=3, dim=12), runtime,
                 expect_delegated="all", expect_partitions=1, precision="fp16", rtol=1e-2,
                 atol=1e-2)


def test_encoder_layer_follows_a_resized_batch(runtime: str) -> None:
    model = encoder_model(seq=7)
    it = check_parity(model, runtime, expect_delegated="all").interpreter
    for batch in (3, 1, 2):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for i in (ref, it):
            i.resize_tensor_input(i.get_input_details()[0]["index"], (batch, 7, 16))
            i.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), batch)
        compare(run(it, inputs), run(ref, inputs), 1e-4, None, f" (batch {batch})")


def test_encoder_layer_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    # 1 KB buffers: views and layer norms where their tensors fit, chunks elsewhere.
    r = check_parity(encoder_model(seq=12, dim=16), runtime, expect_delegated="all",
                     max_alloc_bytes=1024)
    assert r.delegate.memory()["chunked_ops"] >= 1
