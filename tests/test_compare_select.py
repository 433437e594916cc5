"""Comparisons into bools, the logical ops on them, and SELECT / SELECT_V2 on the device
(ops/compare.cc): every result matches TFLite's CPU kernels exactly, broadcasting included,
and a guard like basic-pitch's "max == 0 ? x : x / max" keeps its model in one partition."""

from __future__ import annotations

import numpy as np
import pytest
from parity import CPU_OP, check_parity, cpu_op

from clgpu_delegate.modelgen import ModelBuilder

COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


def halves(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values on a grid of 0.5 from -2 to 2: equal pairs are common, every comparison varies."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-4, 5, size=shape) / 2).astype(np.float32)


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((1, 5), (4, 1)), ((2, 1, 6), ())],
    ids=["same", "bcast_row", "outer", "scalar"],
)
def test_a_comparison_and_the_select_it_guards(
    op: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], runtime: str
) -> None:
    b = ModelBuilder(seed=1)
    x = b.input("x", a_shape)
    y = b.input("y", b_shape)
    cond = getattr(b, op)(x, y)
    b.output(cond)  # the bools themselves, downloaded a byte each
    b.output(
        b.select_v2(cond, b.mul(x, np.array(3, np.float32)), b.add(y, np.array(1, np.float32)))
    )
    inputs = [halves(a_shape, 2), halves(b_shape, 3)]
    r = check_parity(b.build(), runtime, inputs, expect_delegated="all", expect_partitions=1)
    want = getattr(np, op)(inputs[0], inputs[1])
    np.testing.assert_array_equal(r.outputs[0], want)
    assert r.outputs[0].dtype == np.bool_


def test_nan_compares_as_tflite_does(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    x = b.input("x", (8,))
    y = b.input("y", (8,))
    for op in COMPARISONS:
        b.output(getattr(b, op)(x, y))
    nan = np.float32(np.nan)
    inputs = [
        np.array([nan, nan, 1, 2, -np.inf, np.inf, 0, -0.0], np.float32),
        np.array([nan, 1, nan, 2, -np.inf, 1, -0.0, 0], np.float32),
    ]
    r = check_parity(b.build(), runtime, inputs, expect_delegated="all")
    for got, op in zip(r.outputs, COMPARISONS, strict=True):
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got, getattr(np, op)(*inputs), err_msg=op)


def test_logical_ops(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.input("x", (3, 4, 5))
    p = b.greater(x, np.array(0, np.float32))
    q = b.less(x, b.rand((5,)))
    both = b.logical_and(p, q)
    either = b.logical_or(p, b.logical_not(q))
    b.output(
        b.select_v2(
            b.logical_and(both, b.logical_not(either)), x, b.mul(x, np.array(-1, np.float32))
        )
    )
    b.output(either)
    r = check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
    assert r.outputs[1].dtype == np.bool_


def test_select_of_one_shape(runtime: str) -> None:
    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 6, 7))
    y = b.input("y", (2, 6, 7))
    b.output(b.select(b.greater_equal(x, y), x, y))  # an element-wise maximum
    r = check_parity(b.build(), runtime, expect_delegated="all")
    np.testing.assert_array_equal(r.outputs[0], np.maximum(*r.inputs))


def test_select_with_a_batch_condition_stays_on_the_cpu(runtime: str) -> None:
    # SELECT (v1) also takes a condition of one element a batch row; TFLite's own kernel runs it.
    b = ModelBuilder(seed=5)
    x = b.input("x", (3, 4))
    c = b.input("c", (3,), dtype="bool")
    b.output(b.select(c, x, b.mul(x, np.array(-1, np.float32))))
    r = check_parity(b.build(), runtime, expect_cpu={"SELECT"})
    select = next(d for d in r.decisions if d["op_name"] == "SELECT")
    assert "different shapes" in select["reason"], select


def test_a_guarded_normalisation_keeps_one_partition(runtime: str) -> None:
    # basic-pitch's last step: y = max(x) == 0 ? x : x / max(x). With EQUAL and SELECT_V2 on the
    # CPU the model split around them, two downloads and an upload a run.
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 17, 31))
    y = b.conv2d(b.reshape(x, (1, 17, 31, 1)), b.rand((4, 3, 3, 1)))
    y = b.reshape(b.relu(y), (1, 17, 31 * 4))
    peak = b.reduce_max(y, (1, 2), keep_dims=True)
    out = b.select_v2(b.equal(peak, np.array(0, np.float32)), y, b.div(y, peak))
    b.output(out)
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
    # All zeros: the guard takes the other branch, as TFLite's does.
    b2 = ModelBuilder(seed=6)
    z = b2.input("z", (4, 9))
    m = b2.reduce_max(z, (0, 1), keep_dims=True)
    b2.output(b2.select_v2(b2.equal(m, np.array(0, np.float32)), z, b2.div(z, m)))
    r = check_parity(b2.build(), runtime, [np.zeros((4, 9), np.float32)], expect_delegated="all")
    np.testing.assert_array_equal(r.outputs[0], np.zeros((4, 9), np.float32))


def test_bools_across_a_partition_boundary(runtime: str) -> None:
    # A condition made in one partition, read by a SELECT_V2 in the next: the bool crosses TFLite's
    # memory a byte an element both ways.
    b = ModelBuilder(seed=7)
    x = b.input("x", (2, 5, 6))
    cond = b.less_equal(x, np.array(0.25, np.float32))
    gap = cpu_op(b, x)
    b.output(b.select_v2(cond, b.add(gap, x), x))
    check_parity(b.build(), runtime, expect_cpu={CPU_OP}, expect_partitions=2)


def test_select_in_half_storage(runtime: str) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (4, 8, 8))
    b.output(b.select_v2(b.greater(x, b.rand((8,))), b.mul(x, np.array(2, np.float32)), x))
    check_parity(b.build(), runtime, expect_delegated="all", precision="fp16", rtol=2e-3, atol=2e-3)


def test_a_bool_model_input_and_output(runtime: str) -> None:
    # A mask given to the model (uploaded a byte an element) and one it returns.
    b = ModelBuilder(seed=9)
    x = b.input("x", (2, 3, 4))
    keep = b.input("keep", (3, 1), dtype="bool")
    b.output(b.select_v2(keep, x, b.mul(x, np.array(2, np.float32))))
    b.output(b.logical_not(keep))
    mask = np.array([[True], [False], [True]])
    xs = halves((2, 3, 4), 10)
    r = check_parity(b.build(), runtime, [xs, mask], expect_delegated="all")
    np.testing.assert_array_equal(r.outputs[0], np.where(mask, xs, 2 * xs))
    np.testing.assert_array_equal(r.outputs[1], ~mask)
