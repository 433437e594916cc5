"""Reductions (src_cpp/ops/reduce.cc) against stock TFLite CPU: MEAN as global pooling over H, W
(the tiled [outer, reduce, inner] kernel), over the last axis, axis 0, non-adjacent axes (the
general kernel), negative and repeated axes, every axis, ranks 1-5; SUM, REDUCE_PROD, REDUCE_MAX,
REDUCE_MIN; fp16 storage; chunks within a tiny largest allocation; refusals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import tflite
from parity import check_parity, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

OPS = tflite.BuiltinOperator


def reduce_model(
    op: str, shape: tuple[int, ...], axes: Sequence[int], keep_dims: bool = False
) -> bytes:
    b = ModelBuilder(seed=4)
    x = b.input("x", shape)
    if op == "reduce_prod":
        b.output(b._reduce(OPS.REDUCE_PROD, x, axes, keep_dims))
    else:
        b.output(getattr(b, op)(x, axes, keep_dims))
    return b.build()


def _x(shape: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    return [np.random.default_rng(seed).standard_normal(shape).astype(np.float32)]


@pytest.mark.parametrize("keep_dims", [True, False], ids=["keep", "drop"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((1, 7, 7, 96), (1, 2)),  # global average pool: outer N, reduce H*W, inner C
        ((2, 5, 3, 1283), (1, 2)),  # inner wider than a group, not a multiple of it
        ((2, 56, 56, 3), (1, 2)),  # a long reduced extent, few columns
        ((3, 9, 130), (-1,)),  # layer-norm style: the last axis
        ((1, 4, 1000), (2,)),
        ((6, 5, 4), (0,)),  # axis 0: outer 1
        ((3, 4, 5, 6), (0, 2)),  # non-adjacent: the general kernel
        ((3, 4, 5, 6), (1, 3)),
        ((3, 4, 5, 6), (-3, -1)),
        ((2, 3, 4), (0, 1, 2)),  # all of it
        ((5, 7), (1, 1, -1)),  # repeated axes
        ((2, 1, 5, 1, 3), (1, 3)),  # only size-1 axes: a copy
        ((2, 1, 5, 1, 3), (0, 3, 4)),
        ((1, 1, 1), (1,)),  # nothing but size-1 axes
        ((500, 3, 2), (1,)),  # few columns, short extent: one work-item per output
    ],
)
def test_mean_parity(
    shape: tuple[int, ...], axes: tuple[int, ...], keep_dims: bool, runtime: str
) -> None:
    check_parity(
        reduce_model("mean", shape, axes, keep_dims),
        runtime,
        _x(shape),
        expect_delegated="all",
    )


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((37,), (0,)),
        ((4, 9), (0,)),
        ((2, 3, 4), (1,)),
        ((2, 3, 4, 5), (3, 1)),
        ((2, 3, 4, 5, 6), (0, 2, 4)),
        ((2, 3, 4, 5, 6), (1, 2, 3)),
    ],
    ids=["rank1", "rank2", "rank3", "rank4", "rank5_general", "rank5_tiled"],
)
@pytest.mark.parametrize("op", ["mean", "sum", "reduce_max", "reduce_min"])
def test_reductions_by_rank(
    op: str, shape: tuple[int, ...], axes: tuple[int, ...], runtime: str
) -> None:
    check_parity(reduce_model(op, shape, axes), runtime, _x(shape), expect_delegated="all")


@pytest.mark.parametrize("axes", [(1,), (0, 2)], ids=["tiled", "general"])
def test_reduce_prod(axes: tuple[int, ...], runtime: str) -> None:
    shape = (3, 6, 4)
    x = np.random.default_rng(1).uniform(0.5, 1.5, shape).astype(np.float32)
    check_parity(reduce_model("reduce_prod", shape, axes), runtime, [x], expect_delegated="all")


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((3, 5), (1,)), ((3, 5), (0,)), ((3, 5, 2), (0, 2)), ((3, 40), (1,)), ((40, 9), (0,))],
    ids=["short_last", "first", "general", "tiled_last", "tiled_first"],
)
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "sum"])
def test_reductions_with_nan_and_inf_match_tflite(
    op: str, shape: tuple[int, ...], axes: tuple[int, ...], runtime: str
) -> None:
    # TFLite's MAX and MIN give the result over the inputs after the last NaN (in input order),
    # NaN when the last input is one; SUM propagates NaNs. Infinities at the extremes.
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 7
    for i in (0, 7, 9, 22, 29, 79, 100, 119, 200, 351):
        if i < x.size:
            x.flat[i] = np.nan
    x.flat[10:14] = -np.inf
    x.flat[4] = np.inf
    model = reduce_model(op, shape, axes)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    d = clgpu_delegate.load()
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    # check_parity wants finite references; NaN and inf must match exactly here.
    np.testing.assert_array_equal(run(it, [x])[0], run(ref, [x])[0])
    assert d.delegated_nodes() == [0]


@pytest.mark.parametrize(
    ("op", "shape", "axes"),
    [
        ("mean", (1, 12, 10, 40), (1, 2)),
        ("mean", (4, 300), (-1,)),
        ("reduce_max", (3, 4, 5, 6), (0, 2)),
        ("sum", (2, 3, 4), (0, 1, 2)),
    ],
)
def test_reductions_fp16_storage(
    op: str, shape: tuple[int, ...], axes: tuple[int, ...], runtime: str
) -> None:
    check_parity(
        reduce_model(op, shape, axes, True),
        runtime,
        _x(shape),
        rtol=1e-2,
        atol=1e-2,
        expect_delegated="all",
        precision="fp16",
    )


@pytest.mark.parametrize("axes", [(1, 2), (0, 2)], ids=["tiled", "general"])
def test_reduce_in_chunks_within_a_tiny_allocation(axes: tuple[int, ...], runtime: str) -> None:
    # 3 KB buffers: the 8 KB input is kept in pieces and the op runs in chunks of kept axes.
    shape = (4, 8, 8, 8)
    r = check_parity(
        reduce_model("mean", shape, axes, False),
        runtime,
        _x(shape),
        expect_delegated="all",
        max_alloc_bytes=3072,
    )
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_reduce_too_large_for_any_chunk_stays_on_cpu(runtime: str) -> None:
    # Everything reduced: no kept axis to cut, so no chunk fits 1 KB.
    shape = (16, 32)
    r = check_parity(
        reduce_model("sum", shape, (0, 1)),
        runtime,
        _x(shape),
        expect_cpu="all",
        max_alloc_bytes=1024,
    )
    assert "largest allocation" in r.reason(0)


def test_mean_then_conv_is_one_partition(runtime: str) -> None:
    # Squeeze-and-excite: global pool with kept dims, 1x1 convs, the scale stays on the CPU (MUL).
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 6, 6, 16))
    y = b.mean(x, (1, 2), keep_dims=True)
    y = b.conv2d(y, b.rand((4, 1, 1, 16)), b.rand((4,)), activation="RELU")
    b.output(b.conv2d(y, b.rand((16, 1, 1, 4)), b.rand((16,))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_non_constant_axes_stay_on_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (2, 3, 4))
    axes = b.input("axes", (1,), dtype="int32")
    b.output(b._op(OPS.SUM, [x, axes], [(2, 4)], options="ReducerOptions", KeepDims=False)[0])
    r = check_parity(
        b.build(), runtime, [_x((2, 3, 4))[0], np.array([1], np.int32)], expect_cpu="all"
    )
    assert "axes" in r.reason(0) and "constant" in r.reason(0)


def test_out_of_range_axis_is_refused() -> None:
    # The runtime refuses such a model itself; the check must refuse it without crashing first.
    b = ModelBuilder(seed=10)
    x = b.input("x", (2, 3))
    b.output(
        b._op(
            OPS.MEAN,
            [x, b._int_const([2], "axes")],
            [(2,)],
            options="ReducerOptions",
            KeepDims=False,
        )[0]
    )
    d = clgpu_delegate.load(partitioning="all")
    try:
        it = make_interpreter(b.build(), [d], reference=True)
        it.allocate_tensors()
    except (RuntimeError, ValueError):
        pass
    decisions = d.decisions()
    if decisions:  # the runtime may reject the model before the delegate sees it
        assert "out of range" in decisions[0]["reason"]


def test_squeeze_excite_block_is_one_partition(runtime: str) -> None:
    # MEAN -> FC (conv 1x1) -> FC -> sigmoid -> MUL, as MobileNetV3 and EfficientNet have.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 9, 9, 8))
    s = b.mean(x, [1, 2], keep_dims=True)
    s = b.conv2d(s, b.rand((2, 1, 1, 8)), activation="RELU")
    s = b.logistic(b.conv2d(s, b.rand((8, 1, 1, 2))))
    b.output(b.mul(x, s))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_long_reduction_over_few_outputs_runs_in_slices(op: str, runtime: str) -> None:
    # A squeeze-excite MEAN over a large image: few groups, each with a long extent, so the
    # extent is cut into slices reduced apart and added up by a second launch.
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 64, 48, 5))
    b.output(b.mean(x, [1, 2], True) if op == "MEAN" else b.sum(x, [1, 2], True))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    prof = r.delegate.profile()
    assert [k.algorithm for k in prof.kernels] == ["tiled_split"]
    assert prof.partitions[0].kernels_per_invoke == 2


def _resized_to_empty(model: bytes, runtime: str, shape: tuple[int, ...], delegate: object) -> Any:
    it = make_interpreter(model, [delegate] if delegate else None, runtime=runtime, reference=True)
    x = it.get_input_details()[0]
    it.resize_tensor_input(x["index"], list(shape))
    it.allocate_tensors()
    it.set_tensor(x["index"], np.zeros(shape, x["dtype"]))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("op", ["mean", "sum", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("axes", [(1, 2), (1, 3)], ids=["tiled", "general"])
def test_an_input_resized_empty_along_a_reduced_axis(
    op: str, axes: tuple[int, ...], runtime: str
) -> None:
    # TFLite's kernels give their running value's start where nothing is reduced: 0, 1, and
    # -FLT_MAX / FLT_MAX for MAX / MIN (not the infinities), NaN for a float MEAN.
    model = reduce_model(op, (1, 4, 5, 8), axes)
    want = _resized_to_empty(model, runtime, (1, 0, 5, 8), None)
    with clgpu_delegate.load(partitioning="all", cpu_warmup=False) as d:
        got = _resized_to_empty(model, runtime, (1, 0, 5, 8), d)
        assert d.delegated_nodes() == [0]
    np.testing.assert_array_equal(got, want)


def test_an_int8_mean_resized_empty_is_a_clear_error(runtime: str) -> None:
    from clgpu_delegate.modelgen import quantize_model

    model = quantize_model(reduce_model("mean", (1, 4, 5, 8), (1, 2)), io="int8", seed=4)
    empty = r"int8 MEAN over an empty axis: input \[1,0,5,8\]"
    with (
        clgpu_delegate.load(partitioning="all", cpu_warmup=False) as d,
        pytest.raises(RuntimeError, match=empty),
    ):
        _resized_to_empty(model, runtime, (1, 0, 5, 8), d)
