"""Constant subgraphs folded at Prepare (delegate/constant_folding.h): chains of ops over
constants alone, as litert-torch leaves Swin's shifted-window masks (PAD, SLICE, SUB,
NOT_EQUAL, SELECT_V2 over constants), run once by TFLite's own CPU kernels; their values are
constants of the partition, the nodes claimed and launching nothing."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from folds import launches
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

SHAPE = (1, 2, 4, 4)


def f32(v: object) -> np.ndarray:
    return np.array(v, np.float32)


def mask_of_constants(b: ModelBuilder) -> int:
    """A (4, 4) attention bias from constants only, through ops the delegate runs (PAD, SLICE,
    SUB, NOT_EQUAL, SELECT_V2): 0 where two windows' region ids agree,
    -100 elsewhere."""
    ids = b.const(np.tile(f32([0, 0, 1, 2]), (3, 1)))  # (3, 4) region ids
    padded = b.pad(ids, [(1, 0), (0, 0)])  # (4, 4)
    rows = b.slice(padded, [0, 0], [4, 4])
    diff = b.sub(rows, b.transpose(rows, (1, 0)))
    return b.select_v2(b.not_equal(diff, f32(0)), f32(-100), f32(0))


def numpy_mask() -> np.ndarray:
    ids = np.concatenate([np.zeros((1, 4), np.float32), np.tile(f32([0, 0, 1, 2]), (3, 1))])
    return np.where(ids - ids.T != 0, f32(-100), f32(0)).astype(np.float32)


def attention(mask: int | np.ndarray) -> bytes:
    b = ModelBuilder(seed=11)
    x = b.input("scores", SHAPE)
    m = mask_of_constants(b) if isinstance(mask, int) else b.const(mask)
    b.output(b.softmax(b.add(x, m)))
    return b.build()


def test_a_mask_of_constants_folds(runtime: str) -> None:
    r = check_parity(
        attention(0), runtime, expect_delegated="all", expect_partitions=1, profiling=True
    )
    # As many launches as the same model with the mask given as one constant: the chain that
    # computed it launches nothing.
    plain = check_parity(attention(numpy_mask()), runtime, expect_delegated="all", profiling=True)
    assert launches(r) == launches(plain), (launches(r), launches(plain))
    # The fold's values are the CPU kernels' (numpy's mask gives the same outputs).
    np.testing.assert_array_equal(r.outputs[0], plain.outputs[0])


def test_a_folded_constant_also_read_on_the_cpu_stays_there(runtime: str) -> None:
    # The mask also feeds an op the delegate leaves to the CPU (FLOOR_DIV, with a run-time
    # divisor): the chain computing it must run there too, every invoke.
    b = ModelBuilder(seed=12)
    x = b.input("scores", SHAPE)
    m = mask_of_constants(b)
    y = b.add(x, m)
    b.output(b.softmax(y))
    floor_div = tflite.BuiltinOperator.FLOOR_DIV
    b.output(b._binary(floor_div, "FloorDivOptions", m, x, None, fused=False))
    r = check_parity(b.build(), runtime)
    chain = [d for d in r.decisions if d.op_name in ("PAD", "SLICE", "SUB", "TRANSPOSE")]
    assert chain and not any(d.delegated for d in chain), r.decisions
    assert any(d.delegated and d.op_name == "ADD" for d in r.decisions), r.decisions


def test_a_folded_constant_that_is_a_model_output(runtime: str) -> None:
    # A model output computed from constants: TFLite must still write it.
    b = ModelBuilder(seed=13)
    x = b.input("scores", SHAPE)
    m = mask_of_constants(b)
    b.output(b.softmax(b.add(x, m)))
    b.output(m)
    r = check_parity(b.build(), runtime)
    np.testing.assert_array_equal(r.outputs[1], numpy_mask())


@pytest.mark.parametrize("precision", ["fp16"])
def test_a_folded_mask_in_half_storage(runtime: str, precision: str) -> None:
    # The folded values are weights like any other: stored in half with fp16 storage.
    check_parity(
        attention(0),
        runtime,
        expect_delegated="all",
        precision=precision,
        rtol=2e-3,
        atol=2e-3,
    )
