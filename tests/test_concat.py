"""CONCATENATION parity with stock TFLite CPU: 1-17 inputs on every axis (negative too), runs
that do and do not allow float4 copies, constant and empty inputs, batch > 1. Up to 8 inputs
run as one launch, more as one launch per 8. A fused activation, which TFLite's kernels
refuse, is declined; the kernels' clamp is checked against numpy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity

import clgpu_delegate
from clgpu_delegate._native import core
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Concat(NamedTuple):
    shapes: tuple[tuple[int, ...], ...]
    axis: int
    const: tuple[int, ...] = ()  # indices of the inputs that are constant tensors
    activation: str | None = None  # TFLite's CPU kernels accept only None


CASES = {
    "c_2_vec4": Concat(((1, 6, 5, 8), (1, 6, 5, 4)), 3),
    "c_2_odd": Concat(((2, 5, 7, 3), (2, 5, 7, 5)), 3),
    "c_3_mixed": Concat(((1, 4, 3, 4), (1, 4, 3, 3), (1, 4, 3, 8)), 3),
    "c_5": Concat(tuple((2, 3, 4, c) for c in (1, 4, 2, 7, 4)), -1),
    "h_2": Concat(((2, 3, 5, 6), (2, 4, 5, 6)), 1),
    "w_3_neg": Concat(((1, 5, 2, 3), (1, 5, 1, 3), (1, 5, 4, 3)), -2),
    "batch_2": Concat(((1, 3, 3, 5), (3, 3, 3, 5)), 0),
    "rank2_axis1": Concat(((4, 3), (4, 9)), 1),
    "rank2_axis0": Concat(((3, 7), (5, 7), (1, 7)), -2),
    "rank1": Concat(((5,), (3,), (8,)), 0),
    "rank3_const": Concat(((2, 5, 4), (2, 5, 3)), 2, const=(1,)),
    "const_first": Concat(((1, 4, 4, 4), (1, 4, 4, 6)), 3, const=(0,)),
    "rank5": Concat(((2, 3, 1, 2, 5), (2, 3, 4, 2, 5)), 2),
    "rank6": Concat(((1, 2, 3, 2, 2, 3), (1, 2, 3, 2, 2, 1)), 5),
    "single_input": Concat(((2, 3, 4, 5),), 3),
    # More inputs than one launch takes (8): the rest in a second (third) launch.
    "c_9_vec4": Concat(tuple((1, 3, 5, 4 * (1 + i % 3)) for i in range(9)), 3),
    "c_9_mixed": Concat(tuple((1, 3, 5, c) for c in (4, 3, 8, 1, 4, 5, 12, 2, 4)), 3, const=(2,)),
    "c_17": Concat(tuple((2, 3, 1 + i % 5) for i in range(17)), -1, const=(0, 9)),
    "h_10": Concat(tuple((2, 1 + i % 3, 3, 5) for i in range(10)), 1, const=(4,)),
    "w_12_vec4_rows": Concat(tuple((1, 2, 1 + i % 4, 4) for i in range(12)), 2),
    # Inputs with no elements on the axis: nothing to copy, no slot taken.
    "empty_mid": Concat(((1, 3, 4, 5), (1, 3, 4, 0), (1, 3, 4, 3)), 3),
    "empty_const_vec4": Concat(((2, 0, 4), (2, 8, 4), (2, 0, 4), (2, 4, 4)), 1, const=(2,)),
    "c_9_one_empty": Concat(tuple((1, 2, 3, 0 if i == 4 else 1 + i) for i in range(9)), 3),
}


def concat_model(case: Concat, seed: int = 0) -> bytes:
    b = ModelBuilder(seed=seed)
    tensors = [
        b.const(b.rand(s, scale=1.0)) if i in case.const else b.input(f"x{i}", s)
        for i, s in enumerate(case.shapes)
    ]
    b.output(b.concat(tensors, case.axis, case.activation))
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_concat_parity(case: Concat, runtime: str) -> None:
    r = check_parity(concat_model(case), runtime, expect_delegated="all", atol=0, rtol=0)
    assert r.stats["invokes"] >= 1


def test_concat_same_tensor_twice_between_convs(runtime: str) -> None:
    # conv -> concat(y, x, y) -> conv: the whole graph in one partition.
    b = ModelBuilder(seed=3)
    x = b.input("x", (2, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)), activation="RELU")
    z = b.concat([y, x, y], 3)
    b.output(b.conv2d(z, b.rand((5, 1, 1, 12))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_int32_concat_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    b.output(b.concat([b.input("a", (2, 3), "int32"), b.input("b", (2, 4), "int32")], 1))
    r = check_parity(b.build(), runtime, expect_cpu="all", atol=0, rtol=0)
    assert "float32" in r.reason(0)


# case -> launches per invoke, kernels, algorithm: one launch per 8 non-empty inputs, float4
# where every input of a launch, its first column and the output row are multiples of 4.
LAUNCHES = {
    "c_2_vec4": (1, {"concat_multi4"}, "copy_multi4"),
    "c_3_mixed": (1, {"concat_multi"}, "copy_multi"),
    "c_5": (1, {"concat_multi"}, "copy_multi"),
    "single_input": (1, {"concat_multi"}, "copy_multi"),
    "c_9_vec4": (2, {"concat_multi4"}, "copy_multi4"),
    "c_9_mixed": (2, {"concat_multi"}, "copy_multi"),
    "c_17": (3, {"concat_multi"}, "copy_multi"),
    "w_12_vec4_rows": (2, {"concat_multi4"}, "copy_multi4"),
    "empty_mid": (1, {"concat_multi"}, "copy_multi"),
    "empty_const_vec4": (1, {"concat_multi4"}, "copy_multi4"),
    "c_9_one_empty": (1, {"concat_multi"}, "copy_multi"),
}


@pytest.mark.parametrize("name", LAUNCHES)
def test_concat_launches_once_per_8_inputs(name: str, runtime: str) -> None:
    launches, kernels, algorithm = LAUNCHES[name]
    r = check_parity(
        concat_model(CASES[name]), runtime, expect_delegated="all", atol=0, rtol=0, profiling=True
    )
    prof = r.delegate.profile()
    assert [p.kernels_per_invoke for p in prof.partitions] == [launches], prof.table()
    assert {k.kernel for k in prof.kernels} == kernels, prof.table()
    assert {k.algorithm for k in prof.kernels} == {algorithm}, prof.table()


def test_concat_of_four_is_one_launch(runtime: str) -> None:
    # The case the one-launch form is for: a channel concatenation of four branches between
    # convs (Inception), delegated as one partition; the concat adds exactly one launch. With
    # the concat fold off: it has the convs write their branches in place (fusion/concat.cc).
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 7, 7, 8))
    branches = [b.conv2d(x, b.rand((oc, 1, 1, 8)), activation="RELU") for oc in (8, 12, 4, 6)]
    b.output(b.conv2d(b.concat(branches, 3), b.rand((5, 1, 1, 30))))
    no_concat = "affine,pad,clamp,epilogue,residual,views,squeeze,gate,depthwise,prelu,expand,"
    r = check_parity(
        b.build(),
        runtime,
        expect_delegated="all",
        expect_partitions=1,
        profiling=True,
        fuse=no_concat + "pool,gathers",
    )
    prof = r.delegate.profile()
    concat = [k for k in prof.kernels if k.op == "CONCATENATION"]
    assert [(k.kernel, k.algorithm) for k in concat] == [("concat_multi", "copy_multi")]
    assert concat[0].count == prof.partitions[0].invokes, prof.table()  # once per invoke


def test_concat_of_constants_only(runtime: str) -> None:
    # Every input constant: the output is still computed on the device (then added to x).
    b = ModelBuilder(seed=2)
    x = b.input("x", (2, 7))
    c = b.concat([b.const(np.ones((2, 3), np.float32)), b.const(b.rand((2, 4), 1.0))], 1)
    b.output(b.add(x, c))
    check_parity(b.build(), runtime, expect_delegated="all")


@pytest.mark.parametrize("activation", ["RELU", "RELU6"])
def test_concat_with_activation_is_declined_like_the_cpu_refuses_it(
    activation: str, runtime: str
) -> None:
    model = concat_model(Concat(((1, 3, 3, 4), (1, 3, 3, 4)), 3, activation=activation))
    d = clgpu_delegate.load(partitioning="all")
    interp = make_interpreter(model, [d], runtime=runtime, reference=True)
    assert d.delegated_nodes() == []
    assert "activation" in d.decisions()[0].reason, d.decisions()
    with pytest.raises(RuntimeError, match="activation"):
        interp.allocate_tensors()


# ---- the kernels against numpy: the fused clamp, a span after column 0, unused slots ----

SLOTS = 8


@pytest.fixture(scope="module")
def runner():
    return core().KernelRunner("auto")


def _multi_args(
    out: np.ndarray, ins: list[np.ndarray], col0: int, lo: float, hi: float, div: int
) -> list[object]:
    """concat_multi's arguments for `ins` ([rows, cols_k] each) at column col0 of `out`."""
    rows, out_cols = out.shape
    ends = np.cumsum([a.shape[1] // div for a in ins]).tolist()
    span = ends[-1]
    ends += [span] * (SLOTS - len(ins))
    slots = [*ins, *([ins[0]] * (SLOTS - len(ins)))]
    return [out, rows * span, span, out_cols // div, col0 // div, lo, hi, *slots, *ends[:7]]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(
    ("widths", "col0", "vec4"),
    [
        ((3, 1, 7, 2, 5), 2, False),
        ((4, 8, 4, 12, 4, 4, 8, 4), 8, True),
        ((4,), 0, True),
        ((1, 2, 3, 4, 5, 6, 7, 8), 5, False),
    ],
)
@pytest.mark.parametrize(("lo", "hi"), [(0.0, float("inf")), (0.0, 6.0), (-1.0, 1.0)])
def test_concat_multi_kernel_clamps(widths, col0, vec4, lo, hi, precision, runner, rng) -> None:
    dtype, defines = (np.float16, "-DSTORAGE_HALF") if precision == "fp16" else (np.float32, "")
    rows, tail = 3, 4
    ins = [(rng.standard_normal((rows, w)) * 5).astype(dtype) for w in widths]
    out = np.full((rows, col0 + sum(widths) + tail), -7.0, dtype)  # outside the span: untouched
    expected = out.copy()
    expected[:, col0 : col0 + sum(widths)] = np.clip(np.concatenate(ins, axis=1), lo, hi)
    div = 4 if vec4 else 1
    args = _multi_args(out, ins, col0, lo, hi, div)
    total = args[1]
    kernel = "concat_multi4" if vec4 else "concat_multi"
    runner.run("concat", kernel, defines, args, [-(-total // 64) * 64], [64])
    np.testing.assert_array_equal(out, expected)
