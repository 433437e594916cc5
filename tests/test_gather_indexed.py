"""GATHER with run-time int32 positions and EMBEDDING_LOOKUP (a BERT encoder's token embedding)
against stock TFLite CPU: float, folded-DEQUANTIZE and int8 dynamic-range tables, positions from
the model's input or from a CPU op, and an index outside the table, which fails the invoke on
the CPU and must fail it with the delegate too (never a read past the table, never stale rows)."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity, compare, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, dynamic_range_model
from clgpu_delegate.runtime import make_interpreter

VOCAB, WIDTH, TOKENS = 50, 12, 9


def _ids(seed: int, n: int = TOKENS, high: int = VOCAB) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, n).astype(np.int32)


def encoder_head(table: str = "float", positions: str = "input") -> bytes:
    """Token ids -> EMBEDDING_LOOKUP -> + position embedding -> a dense layer, as an encoder's
    first layers. table: float, int8 (TFLite's hybrid kernel; per-row scales), int8_tensor (one
    scale). positions: input (the ids are the model's input), reshape (an int32 RESHAPE writes
    them, as litert-torch's BERT does), cpu_op (an int32 ADD, which the delegate leaves to the
    CPU, writes them)."""
    b = ModelBuilder(seed=1)
    if positions == "reshape":
        ids = b.reshape(b.input("ids", (1, TOKENS), dtype="int32"), (TOKENS,))
    elif positions == "cpu_op":
        ids = b.add(b.input("ids", (TOKENS,), dtype="int32"), np.zeros(TOKENS, np.int32))
    else:
        ids = b.input("ids", (TOKENS,), dtype="int32")
    values = b.rand((VOCAB, WIDTH), scale=1.0)
    if table == "float":
        t = b.const(values)
    else:
        per_row = table == "int8"
        scale = np.abs(values).max(axis=1 if per_row else None, keepdims=per_row) / 127.0
        t = b.const(np.clip(np.round(values / scale), -127, 127).astype(np.int8))
        b.set_quant(t, [float(s) for s in scale.ravel()] if per_row else float(scale))
    x = b.embedding_lookup(ids, t)
    x = b.add(x, b.rand((TOKENS, WIDTH), scale=0.1))
    b.output(b.fully_connected(x, b.rand((16, WIDTH)), activation="RELU"))
    return b.build()


@pytest.mark.parametrize("table", ["float", "int8", "int8_tensor"])
def test_embedding_lookup_runs_on_the_device(table: str, runtime: str) -> None:
    model = encoder_head(table)
    if table == "int8" and runtime == "tflite_runtime":
        # 2.14's hybrid kernel outputs zeros for per-row scales: left to it, with the reason.
        r = check_parity(model, runtime, inputs=[_ids(0)], expect_cpu={"EMBEDDING_LOOKUP"})
        assert "scale per row" in r.reason(0)
        return
    r = check_parity(model, runtime, inputs=[_ids(0)], expect_delegated="all", expect_partitions=1)
    # New ids each invoke: rows of this invoke's ids, not the last one's.
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    for seed in (1, 2):
        compare(run(r.interpreter, [_ids(seed)]), run(ref, [_ids(seed)]), 1e-5, None)


def test_ids_written_by_a_cpu_op_are_a_partition_input(runtime: str) -> None:
    check_parity(
        encoder_head(positions="cpu_op"),
        runtime,
        inputs=[_ids(3)],
        expect_cpu={0},
        expect_partitions=1,
    )


def test_ids_reshaped_on_the_device_are_checked_at_their_source(runtime: str) -> None:
    # litert-torch's BERT: the int32 RESHAPE runs on the device too, and the positions are
    # checked in the partition's input it copies.
    model = encoder_head(positions="reshape")
    r = check_parity(
        model,
        runtime,
        inputs=[_ids(3).reshape(1, TOKENS)],
        expect_delegated="all",
        expect_partitions=1,
    )
    ids = _ids(4).reshape(1, TOKENS)
    ids[0, 2] = VOCAB
    with pytest.raises(RuntimeError, match="index out of bounds. Got " + str(VOCAB)):
        run(r.interpreter, [ids])


@pytest.mark.parametrize("bad", [VOCAB, -1, 10**6])
def test_an_index_outside_the_table_fails_the_invoke_like_the_cpu(bad: int, runtime: str) -> None:
    model = encoder_head()
    ids = _ids(4)
    ids[5] = bad
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    with pytest.raises(RuntimeError):
        run(ref, [ids])
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    good = run(it, [_ids(5)])
    with pytest.raises(RuntimeError, match="index out of bounds. Got " + str(bad)):
        run(it, [ids])
    # The interpreter goes on: a valid invoke after the failed one is right.
    compare(run(it, [_ids(5)]), good, 0, 0)


@pytest.mark.parametrize(("shape", "axis"), [((20, 6), 0), ((3, 11, 5), 1), ((4, 7), 1)])
def test_gather_with_run_time_positions(shape, axis, runtime: str) -> None:
    # Params an activation (a layer's output), positions the model's second input.
    b = ModelBuilder(seed=2)
    x = b.input("x", shape)
    pos = b.input("pos", (2, 3), dtype="int32")
    y = b.gather_at(b.mul(x, 2.0), pos, axis=axis)
    b.output(b.add(y, 1.0))
    rng = np.random.default_rng(6)
    inputs = [
        rng.standard_normal(shape).astype(np.float32),
        rng.integers(0, shape[axis], (2, 3)).astype(np.int32),
    ]
    check_parity(b.build(), runtime, inputs=inputs, expect_delegated="all", expect_partitions=1)


def test_gather_from_a_dequantized_table(runtime: str) -> None:
    # TF's dynamic-range converter: GATHER(DEQUANTIZE(int8 table), ids); the DEQUANTIZE folds.
    b = ModelBuilder(seed=3)
    ids = b.input("ids", (TOKENS,), dtype="int32")
    b.output(b.add(b.gather_at(b.rand((VOCAB, WIDTH)), ids), 0.5))
    model = dynamic_range_model(b.build())
    check_parity(model, runtime, inputs=[_ids(8)], expect_cpu=set(), expect_partitions=1)


def test_int64_positions_stay_on_the_cpu_with_a_reason() -> None:
    b = ModelBuilder(seed=4)
    ids = b.input("ids", (TOKENS,), dtype="int64")
    b.output(b.gather_at(b.rand((VOCAB, WIDTH)), ids))
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(b.build(), [d]).allocate_tensors()
    reasons = [x.reason for x in d.decisions() if x.op_name == "GATHER"]
    assert reasons and "int64" in reasons[0], reasons
