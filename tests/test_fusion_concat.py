"""A CONCATENATION of convolutions' outputs folded into them (fusion/concat.cc): each CONV_2D
writes its rows straight into the concatenation's tensor (kernels/gemm_tiles.cl's OUT_SLICE), so
the concatenation runs no kernel. Against TFLite's CPU kernels with the pass on and off: the
plain and the implicit GEMM, split K (the reduce writes), channel counts and offsets that are not
multiples of 4 (scalar stores), fp16 storage, a clamp and an epilogue folded into a convolution
before it, a folded per-channel MUL / ADD or PRELU, two images, blocks along H of one image, a
detector's heads through RESHAPEs (with a folded depthwise too); not folded where an input has
another reader, is a partition output or comes from an op that is no convolution, where a
RESHAPE regroups the rows of a last-axis concatenation, for int8, and for the outer one of two
nested; the cost model counts the launch it saves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, op_nodes, pass_on_and_off
from int8_parity import check_int8_parity
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

NO_CONCAT = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,depthwise,prelu,expand,pool,gathers"
)


def branches(
    shape: tuple[int, int, int, int] = (1, 9, 7, 12),
    widths: tuple[int, ...] = (8, 6, 5),
    axis: int = 3,
    second_reader: bool = False,
    branch_output: bool = False,
    pool_branch: bool = False,
    tails: bool = False,
    seed: int = 0,
) -> bytes:
    """An Inception block: a 1x1 branch, a 3x3 branch after a 1x1, an average pool then a 1x1,
    ... concatenated and read by a 3x3 convolution."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    outs = []
    for k, w in enumerate(widths):
        if k % 3 == 0:
            y = b.conv2d(x, b.rand((w, 1, 1, c)), b.rand((w,), 0.2), 1, 1, "SAME", "RELU")
        elif k % 3 == 1:
            h = b.conv2d(x, b.rand((4, 1, 1, c)), b.rand((4,), 0.2), 1, 1, "SAME", "RELU")
            y = b.conv2d(h, b.rand((w, 3, 3, 4)), b.rand((w,), 0.2), 1, 1, "SAME", "RELU6")
        else:
            p = b.avg_pool2d(x, 3, 1, "SAME")
            y = p if pool_branch else b.conv2d(p, b.rand((w, 1, 1, c)), None, 1, 1, "SAME", None)
        if tails:  # element-wise nodes the clamp and epilogue passes fold into the conv
            y = b.tanh(y) if k % 2 else b.relu6(y)
        outs.append(y)
    if second_reader:
        b.output(b.mul(outs[0], np.full((1,), 2.0, np.float32)))
    if branch_output:
        b.output(outs[1])
    z = b.concat(outs, axis)
    b.output(b.conv2d(z, b.rand((4, 3, 3, b.shape(z)[3])), None, 1, 1, "SAME", None))
    return b.build()


def concat_folds(model: bytes, runtime: str, folded: int = 1, **options: Any) -> Any:
    on = pass_on_and_off(model, runtime, NO_CONCAT, "CONCATENATION", "+CONCAT", folded, **options)
    assert (folded_nodes(on, "+CONCAT") > 0) == (folded > 0), on.delegate.profile().table()
    return on


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"conv_algorithm": "implicit_gemm"},
        {"gemm_splits": 2},
        {"conv_algorithm": "implicit_gemm", "gemm_splits": 3},
        {"precision": "fp16"},
    ],
    ids=["default", "implicit", "split", "implicit-split", "fp16"],
)
def test_concatenation_of_convolutions_folds(runtime: str, options: dict[str, Any]) -> None:
    on = concat_folds(branches(seed=1), runtime, **options)
    assert folded_nodes(on, "+CONCAT") == 3


@pytest.mark.parametrize(
    "shape,widths,axis",
    [
        ((1, 8, 8, 16), (16, 12, 8, 4), 3),  # every offset a multiple of 4: float4 stores
        ((1, 8, 8, 16), (16, 12, 8, 4), -1),
        ((2, 5, 6, 7), (3, 9, 2), 3),  # two images, odd widths
        ((1, 1, 1, 33), (40, 24, 17), 3),  # one pixel: the plain GEMM's small-M kernel stays
    ],
    ids=["aligned", "axis-1", "batch2", "pixel"],
)
def test_concatenation_shapes(
    runtime: str, shape: tuple[int, int, int, int], widths: tuple[int, ...], axis: int
) -> None:
    model = branches(shape, widths, axis, seed=2)
    if shape[1] * shape[2] == 1:
        # One pixel: the 1x1 branches run the small-M GEMV, which writes no slice.
        check_parity(model, runtime, profiling=True, expect_delegated="all")
        return
    concat_folds(model, runtime, gemm_splits=2 if shape[0] == 2 else 0)


def test_blocks_along_h(runtime: str) -> None:
    """One image concatenated along H: each convolution's output is one block of the result."""
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 6, 5, 8))
    y = b.input("y", (1, 4, 5, 8))
    c1 = b.conv2d(x, b.rand((6, 3, 3, 8)), b.rand((6,), 0.2), 1, 1, "SAME", "RELU")
    c2 = b.conv2d(y, b.rand((6, 1, 1, 8)), b.rand((6,), 0.2), 1, 1, "SAME", None)
    z = b.concat([c1, c2], 1)
    b.output(b.conv2d(z, b.rand((3, 3, 3, 6)), None, 1, 1, "SAME", None))
    concat_folds(b.build(), runtime, gemm_splits=2)


def test_folded_tails_before_the_concatenation(runtime: str) -> None:
    on = concat_folds(branches((1, 6, 6, 8), (8, 6, 4), tails=True, seed=4), runtime)
    assert op_nodes(on, "TANH") == 0 and op_nodes(on, "RELU6") == 0


@pytest.mark.parametrize("kind", ["second_reader", "branch_output", "pool_branch"])
def test_not_folded(runtime: str, kind: str) -> None:
    model = branches(
        (1, 7, 6, 8),
        second_reader=kind == "second_reader",
        branch_output=kind == "branch_output",
        pool_branch=kind == "pool_branch",
        seed=5,
    )
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+CONCAT") == 0, r.delegate.profile().table()
    assert op_nodes(r, "CONCATENATION") == 1


def test_nested_concatenation(runtime: str) -> None:
    """Mixed_7b's: a concatenation of two convolutions inside the block's own. The inner one
    folds; the outer copies (its input is written by two convolutions, none of them whole)."""
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 5, 5, 8))
    h = b.conv2d(x, b.rand((6, 1, 1, 8)), b.rand((6,), 0.2), 1, 1, "SAME", "RELU")
    inner = b.concat(
        [
            b.conv2d(h, b.rand((4, 1, 3, 6)), b.rand((4,), 0.2), 1, 1, "SAME", "RELU"),
            b.conv2d(h, b.rand((5, 3, 1, 6)), b.rand((5,), 0.2), 1, 1, "SAME", "RELU"),
        ],
        3,
    )
    other = b.conv2d(x, b.rand((3, 1, 1, 8)), b.rand((3,), 0.2), 1, 1, "SAME", "RELU")
    b.output(b.concat([other, inner], 3))
    on = concat_folds(b.build(), runtime)
    assert folded_nodes(on, "+CONCAT") == 2 and op_nodes(on, "CONCATENATION") == 1


def test_int8_concatenation_copies(runtime: str) -> None:
    model = quantize_model(branches((1, 6, 6, 8), seed=6), io="int8", seed=6)
    r = check_int8_parity(model, runtime, min_fraction=1.0, max_quanta=0, profiling=True)
    assert folded_nodes(r, "+CONCAT") == 0


def test_cost_model_counts_the_saved_launch(runtime: str) -> None:
    counts, launched = estimated_and_launched(branches(seed=7), runtime)
    assert counts and counts[0] == launched


def heads(along_last: bool, seed: int = 9) -> bytes:
    """A detector's heads at two scales, each RESHAPEd, then concatenated along the boxes (each
    RESHAPE regroups its convolution's channels; each convolution's output is one block of the
    result), or, along_last, along a last axis whose rows the RESHAPEs changed (no fold)."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 8, 8, 8))
    d = b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 2, 1, "SAME", "RELU")  # (1,4,4,8)
    h1 = b.conv2d(x, b.rand((32, 1, 1, 8)), b.rand((32,), 0.2), 1, 1, "SAME", None)
    h2 = b.conv2d(d, b.rand((48, 3, 3, 8)), b.rand((48,), 0.2), 1, 1, "SAME", None)
    if along_last:
        # (1, 8, 256) and (1, 8, 96): a last-axis concatenation of regrouped rows.
        b.output(b.concat([b.reshape(h1, (1, 8, 256)), b.reshape(h2, (1, 8, 96))], 2))
    else:
        b.output(b.concat([b.reshape(h1, (1, 128, 16)), b.reshape(h2, (1, 48, 16))], 1))
    return b.build()


def test_detector_heads_through_reshapes(runtime: str) -> None:
    on = concat_folds(heads(False), runtime, gemm_splits=2)
    assert folded_nodes(on, "+CONCAT") == 2


def test_regrouped_rows_do_not_fold(runtime: str) -> None:
    r = check_parity(heads(True), runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+CONCAT") == 0 and op_nodes(r, "CONCATENATION") == 1


def test_heads_with_a_folded_depthwise(runtime: str) -> None:
    """MediaPipe's heads: a depthwise then a 1x1 convolution (one GEMM with the depthwise folded
    in) per scale, RESHAPEd to [1, boxes, 1] and concatenated along the boxes."""
    b = ModelBuilder(seed=10)
    x = b.input("x", (1, 14, 14, 16))
    d = b.conv2d(x, b.rand((24, 3, 3, 16)), b.rand((24,), 0.2), 2, 1, "SAME", "RELU")  # 7x7
    parts = []
    for y, oc in ((x, 2), (d, 6)):
        c = b.shape(y)[3]
        w = b.depthwise_conv2d(y, b.rand((1, 3, 3, c)), b.rand((c,), 0.2), activation="RELU")
        h = b.conv2d(w, b.rand((oc, 1, 1, c)), b.rand((oc,), 0.2), 1, 1, "SAME", None)
        n = b.shape(h)[1] * b.shape(h)[2] * oc
        parts.append(b.reshape(h, (1, n, 1)))
    b.output(b.concat(parts, 1))
    on = concat_folds(b.build(), runtime, gemm_splits=2)
    assert folded_nodes(on, "+DEPTHWISE+CONCAT") == 2, on.delegate.profile().table()


@pytest.mark.parametrize("fold", ["affine", "prelu"], ids=["affine", "prelu"])
def test_other_folds_then_the_concatenation(runtime: str, fold: str) -> None:
    """A convolution that reads its input through a folded per-channel MUL / ADD (fusion/
    affine.cc), or applies a folded PRELU of a slope per channel (fusion/prelu.cc), writes its
    slice as well: whole and split."""
    b = ModelBuilder(seed=11)
    x = b.input("x", (1, 8, 8, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    parts = []
    for oc in (6, 5):
        y = h
        if fold == "affine":
            y = b.add(b.mul(y, b.rand((8,), 1.0) + 0.5), b.rand((1, 1, 1, 8), 0.5), "RELU")
        y = b.conv2d(y, b.rand((oc, 3, 3, 8)), b.rand((oc,), 0.2), 1, 1, "SAME", None)
        if fold == "prelu":
            y = b.prelu(y, b.rand((1, 1, oc), 0.3))
        parts.append(y)
    b.output(b.conv2d(b.concat(parts, 3), b.rand((4, 1, 1, 11)), None))
    model = b.build()
    tag = "+AFFINE" if fold == "affine" else "+PRELU"
    for splits in (0, 2):
        on = concat_folds(model, runtime, gemm_splits=splits)
        tagged = {k.node for k in on.delegate.profile().kernels if tag in k.algorithm}
        assert tagged and all(
            "+CONCAT" in k.algorithm for k in on.delegate.profile().kernels if k.node in tagged
        ), on.delegate.profile().table()
