"""Per-channel (or scalar) MUL / ADD nodes before a CONV_2D folded into it (fusion/affine.cc,
AttachAffine): the convolution reads the nodes' input and applies them where it reads an element
(the implicit GEMM's A_AFFINE), so they run no kernel. Batch normalization before a convolution
(DenseNet, ResNet v2: MUL, then ADD with a RELU) is the shape converters write. Against
TFLite's CPU kernels with the pass on and off: padding that must stay zero after the nodes,
strides, a MUL or an ADD alone, fused clamps, two convolutions reading the nodes; and what must
not fold (a squeeze-and-excitation gate, which the gate fold takes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes
from folds import launches as _launches
from parity import ParityResult, check_parity, precision_tolerances

from clgpu_delegate.modelgen import ModelBuilder

NO_AFFINE = "pad,clamp,epilogue,residual,views,squeeze,depthwise,expand"  # every pass but affine


def _both(model: bytes, runtime: str, folded: int, precision: str = "fp32") -> ParityResult:
    """Parity with the pass on and off; on, `folded` MUL / ADD nodes ran no kernel of their own
    (and the convolution at most as many as off: the implicit GEMM, one launch or a split's
    two, where off it may run Winograd's)."""
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all", "precision": precision}
    common.update(precision_tolerances(precision))
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_AFFINE, **common)

    def nodes(r: ParityResult) -> int:
        return len({k.node for k in r.delegate.profile().kernels if k.op in ("MUL", "ADD")})

    assert nodes(off) - nodes(on) == folded, on.delegate.profile().table()
    assert _launches(on) <= _launches(off) - folded
    assert folded_nodes(off, "+AFFINE") == 0
    return on


def _bn_conv(
    shape: tuple[int, int, int, int],
    *,
    mul: str | None = "none",
    add: str | None = "RELU",
    k: int = 3,
    stride: int = 1,
    padding: str = "SAME",
    out: int = 8,
    seed: int = 0,
) -> bytes:
    """x -> conv (an activation, not an input) -> [MUL by a vector] -> [ADD of a vector] -> conv.
    mul / add: the node's fused activation ("none": none), None: no such node."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2))
    if mul is not None:
        h = b.mul(h, b.rand((c,), 1.0) + 0.5, None if mul == "none" else mul)
    if add is not None:
        h = b.add(h, b.rand((1, 1, 1, c), 0.5), None if add == "none" else add)
    b.output(b.conv2d(h, b.rand((out, k, k, c)), b.rand((out,), 0.2), stride, 1, padding))
    return b.build()


# Fewer than 16 input channels: the implicit GEMM on every device (Winograd from 16; on a GPU,
# 1x1 stride-1 layers of small maps run the plain GEMM), so the nodes fold everywhere.
CASES = [
    ((1, 9, 9, 8), {}),  # batch normalization, RELU, a padded 3x3
    ((1, 10, 12, 8), {"stride": 2}),
    ((2, 7, 7, 12), {"k": 1, "stride": 2, "add": "RELU6"}),  # 1x1: the implicit GEMM's if strided
    ((1, 8, 8, 6), {"add": None, "mul": "RELU"}),  # channels not a multiple of 4
    ((1, 8, 8, 8), {"mul": None, "add": "RELU_N1_TO_1", "k": 5}),
    ((1, 6, 6, 12), {"mul": "RELU", "add": "none", "padding": "VALID"}),
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_per_channel_nodes_run_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], kw: Any
) -> None:
    nodes = 2 - (kw.get("mul", "none") is None) - (kw.get("add", "RELU") is None)
    on = _both(_bn_conv(shape, seed=sum(shape), **kw), runtime, folded=nodes)
    assert folded_nodes(on, "+AFFINE") == 1


def test_products_past_float_range_clamp_as_the_cpu_clamps_them(runtime: str) -> None:
    # x * 1e38 overflows to +-Inf before the MUL's RELU_N1_TO_1; the CPU clamps it to +-1.
    b = ModelBuilder(seed=13)
    x = b.input("x", (1, 7, 7, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    scale = np.where(np.arange(8) % 2 == 0, 1e38, -1e38).astype(np.float32)
    h = b.mul(h, scale, "RELU_N1_TO_1")
    b.output(b.conv2d(h, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "SAME"))
    on = _both(b.build(), runtime, folded=1)
    assert folded_nodes(on, "+AFFINE") == 1


def test_half_storage_reads_its_vectors_as_half(runtime: str) -> None:
    # fp16 storage: the MUL's and ADD's vectors are half values like the activations.
    on = _both(_bn_conv((1, 9, 9, 8), seed=11), runtime, folded=2, precision="fp16")
    assert folded_nodes(on, "+AFFINE") == 1


def test_a_gate_the_partition_computes_is_not_affine(runtime: str) -> None:
    # Squeeze-and-excitation: x * sigmoid(mean(x)) read by a 1x1 convolution, which the gate
    # fold takes (fusion/gate.cc), not this one.
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 7, 7, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2), 1, 1, "SAME", "RELU")
    gate = b.logistic(b.conv2d(b.mean(h, [1, 2], True), b.rand((8, 1, 1, 8)), b.rand((8,), 0.2)))
    b.output(b.conv2d(b.mul(h, gate), b.rand((12, 1, 1, 8)), b.rand((12,), 0.2)))
    r = check_parity(b.build(), runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+AFFINE") == 0
    assert folded_nodes(r, "+GATE") == 1


@pytest.mark.parametrize("splits", [2, 3])
def test_a_split_implicit_gemm_takes_the_nodes(runtime: str, splits: int) -> None:
    # K split over groups (small maps on a large GPU): the split kernel reads through them.
    model = _bn_conv((1, 5, 5, 12), out=8, seed=splits)
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all", "gemm_splits": splits}
    on = check_parity(model, runtime, **common)
    check_parity(model, runtime, fuse=NO_AFFINE, **common)
    assert folded_nodes(on, "+AFFINE") == 1
    assert any(k.kernel == "conv2d_implicit_gemm_splitk" for k in on.delegate.profile().kernels)


def test_two_convolutions_reading_the_nodes_both_take_them(runtime: str) -> None:
    # ResNet v2's first block of a stage: the shortcut and the main path read one normalization.
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 8, 8, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    h = b.add(b.mul(h, b.rand((8,), 1.0)), b.rand((8,), 0.5), "RELU")
    y = b.conv2d(h, b.rand((16, 1, 1, 8)), b.rand((16,), 0.2), 2, 1, "VALID")
    z = b.conv2d(h, b.rand((16, 3, 3, 8)), b.rand((16,), 0.2), 1, 1, "SAME")
    b.output(y)
    b.output(z)
    on = _both(b.build(), runtime, folded=2)
    assert folded_nodes(on, "+AFFINE") == 2


def _unfolded(model: bytes, runtime: str) -> None:
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+AFFINE") == 0
    assert {k.op for k in r.delegate.profile().kernels} & {"MUL", "ADD"}


def test_nodes_read_elsewhere_stay(runtime: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 6, 6, 8))
    h = b.mul(b.conv2d(x, b.rand((8, 1, 1, 8))), b.rand((8,), 1.0), "RELU")
    b.output(b.add(b.conv2d(h, b.rand((8, 3, 3, 8)), None, 1, 1, "SAME"), h))
    _unfolded(b.build(), runtime)


# 1x1 stride-1 layers that the plain GEMM's tiled kernels run (DenseNet's bottlenecks on 14x14
# and 7x7 maps on a GPU): gemm.cl applies the nodes where it loads a tile of A. Channels not a
# multiple of 4 take the scalar loads; two images, one GEMM over both.
PLAIN = [
    ((1, 6, 6, 8), {}, "fp32"),
    ((1, 7, 7, 6), {"mul": "RELU", "add": None}, "fp32"),
    ((2, 5, 5, 12), {"mul": None, "add": "RELU6"}, "fp32"),
    ((1, 6, 6, 8), {"add": "RELU_N1_TO_1"}, "fp16"),
]


@pytest.mark.parametrize("shape,kw,precision", PLAIN)
def test_the_plain_gemm_takes_the_nodes(
    runtime: str, shape: tuple[int, int, int, int], kw: Any, precision: str
) -> None:
    nodes = 2 - (kw.get("mul", "none") is None) - (kw.get("add", "RELU") is None)
    model = _bn_conv(shape, k=1, padding="VALID", seed=sum(shape) + 1, **kw)
    on = _both(model, runtime, folded=nodes, precision=precision)
    assert folded_nodes(on, "+AFFINE") == 1
    assert any(
        k.op == "CONV_2D" and k.algorithm == "gemm+AFFINE" for k in on.delegate.profile().kernels
    ), on.delegate.profile().table()


@pytest.mark.parametrize("splits", [2, 3])
def test_a_split_plain_gemm_takes_the_nodes(runtime: str, splits: int) -> None:
    # K split over groups, K = 40 not a multiple of the tiles' depth: each split reads its own
    # columns through the nodes, and the tail past K stays zero.
    model = _bn_conv((1, 6, 6, 40), k=1, padding="VALID", out=12, seed=20 + splits)
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all", "gemm_splits": splits}
    on = check_parity(model, runtime, **common)
    check_parity(model, runtime, fuse=NO_AFFINE, **common)
    assert folded_nodes(on, "+AFFINE") == 1
    assert any(k.kernel == "gemm_nt_splitk" for k in on.delegate.profile().kernels)


def test_the_plain_gemm_writes_a_concatenation_through_the_nodes(runtime: str) -> None:
    # DenseNet's layer: concat([x, conv1x1(bn(x))]): the GEMM reads x through the nodes and
    # writes its rows into the concatenation.
    b = ModelBuilder(seed=24)
    x = b.conv2d(b.input("x", (1, 7, 7, 8)), b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    h = b.add(b.mul(x, b.rand((8,), 1.0)), b.rand((8,), 0.5), "RELU")
    y = b.conv2d(h, b.rand((12, 1, 1, 8)), b.rand((12,), 0.2), 1, 1, "VALID", "RELU")
    b.output(b.concat([x, y], 3))
    on = _both(b.build(), runtime, folded=2)
    assert folded_nodes(on, "+AFFINE") == 1


def test_a_few_pixels_keep_the_nodes_apart(runtime: str) -> None:
    # A map of 2x2 pixels runs the small-M kernel, which takes no nodes: they stay apart.
    r = check_parity(
        _bn_conv((1, 2, 2, 8), k=1, padding="VALID", seed=12),
        runtime,
        profiling=True,
        expect_delegated="all",
    )
    assert folded_nodes(r, "+AFFINE") == 0
    assert {k.op for k in r.delegate.profile().kernels} >= {"MUL", "ADD"}


@pytest.mark.parametrize(
    ("form", "precision"),
    [("rescale", "fp32"), ("rescale", "fp16"), ("mul", "fp32"), ("add_first", "fp32")],
)
def test_a_scalar_runs_inside_the_convolution_for_every_channel(
    runtime: str, form: str, precision: str
) -> None:
    # An input's rescale before the first convolution (Keras' Rescaling: x / 127.5 - 1), a
    # scalar MUL of shape [1], an ADD of shape [1, 1, 1, 1] written first with a RELU: one value
    # for every channel; the padded taps of the strided 3x3 stay zero.
    b = ModelBuilder(seed=14)
    x = b.input("x", (1, 13, 12, 3))
    one = np.float32
    if form == "rescale":
        h = b.add(b.mul(x, np.array(1 / 127.5, one)), np.array(-1.0, one))
    elif form == "mul":
        h = b.mul(x, np.array([1.5], one))
    else:
        h = b.add(np.array([[[[-0.25]]]], one), x, "RELU")
    b.output(b.conv2d(h, b.rand((8, 3, 3, 3)), b.rand((8,), 0.2), 2, 1, "SAME"))
    r = check_parity(
        b.build(),
        runtime,
        profiling=True,
        expect_delegated="all",
        precision=precision,
        **precision_tolerances(precision),
    )
    assert folded_nodes(r, "+AFFINE") == 1
    assert not {k.op for k in r.delegate.profile().kernels} & {"MUL", "ADD"}


@pytest.mark.parametrize("operand", ["full", "rows"])
def test_operands_not_of_the_channels_stay(runtime: str, operand: str) -> None:
    b = ModelBuilder(seed=10)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)))
    v = {
        "full": b.rand((1, 6, 6, 8), 1.0),
        "rows": b.rand((1, 6, 1, 1), 1.0),
    }[operand]
    b.output(b.conv2d(b.mul(h, v), b.rand((8, 3, 3, 8)), None, 1, 1, "SAME"))
    _unfolded(b.build(), runtime)


def test_the_cost_model_counts_the_folded_launches(runtime: str) -> None:
    # decisions' estimate counts the kernels the partition launches.
    counts, launched = estimated_and_launched(_bn_conv((1, 9, 9, 8), seed=3), runtime)
    assert counts and counts[0] == launched
