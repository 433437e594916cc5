"""Chains of concatenations extended in place (fusion/concat_chain.cc): DenseNet's dense block
concatenates its running tensor with each layer's new channels, and each layer reads the tensor
so far. The chain's concatenations all live in the last one's tensor: each layer's convolution
writes its channels there (OUT_SLICE), the links run no kernel, the first concatenation copies
at the wider pitch, and the layers read the first columns at that pitch (the GEMMs' A_PITCH /
the implicit GEMM's IN_PITCH). Against TFLite's CPU kernels with the pass on and off: the plain
and the implicit GEMM as readers, batch normalization folded into them or not, split K, channel
counts that are not multiples of 4, fp16 storage, two images; a chain cut where a link's output
has a reader that cannot read at a pitch, or is a partition output; the cost model's count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, op_nodes, pass_on_and_off
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

NO_CHAIN = (  # every pass but concat_chain
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,ds_chain,depthwise,prelu,requantize,"
    "expand,pool,squeeze_tail,gathers,concat,dense_chain"
)


def dense_block(
    shape: tuple[int, int, int, int] = (1, 8, 8, 16),
    layers: int = 4,
    growth: int = 8,
    bottleneck: int = 12,
    *,
    bn: bool = True,
    k: int = 3,
    mean_reader: int = -1,
    output_link: int = -1,
    seed: int = 0,
) -> bytes:
    """A pool, then `layers` dense layers (batch normalization as MUL, ADD + RELU when `bn`, a
    1x1 bottleneck with RELU, a k x k convolution of `growth` channels, concatenated with the
    tensor so far), then a transition (a 1x1 convolution). mean_reader: that link's output also
    read by a MEAN (a partition output); output_link: that link's output a model output."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    h = b.max_pool2d(x, 2, 1, "SAME")
    for i in range(layers):
        c = b.shape(h)[3]
        t = h
        if bn:
            t = b.mul(t, b.rand((c,), 0.5) + 1.0)
            t = b.add(t, b.rand((c,), 0.2), "RELU")
        t = b.conv2d(
            t, b.rand((bottleneck, 1, 1, c)), b.rand((bottleneck,), 0.2), 1, 1, "SAME", "RELU"
        )
        y = b.conv2d(t, b.rand((growth, k, k, bottleneck)), None, 1, 1, "SAME", None)
        h = b.concat([h, y], 3)
        if i == mean_reader:
            b.output(b.mean(h, [1, 2], keep_dims=True))
        if i == output_link:
            b.output(h)
    c = b.shape(h)[3]
    b.output(b.conv2d(h, b.rand((8, 1, 1, c)), b.rand((8,), 0.2), 1, 1, "SAME", "RELU"))
    return b.build()


def chain_on_and_off(model: bytes, runtime: str, links: int, **options: Any) -> Any:
    """Parity with the pass on and off; on, `links` concatenations ran no kernel and the invoke
    launched as many fewer, the chain's first one copying at the pitch ("+CHAIN") and the layers
    reading it ("+PITCH"); off, neither."""
    on = pass_on_and_off(model, runtime, NO_CHAIN, "CONCATENATION", "+PITCH", links, **options)
    if links:
        table = on.delegate.profile().table()
        assert folded_nodes(on, "+PITCH") > 0 and folded_nodes(on, "+CHAIN") > 0, table
    return on


# The links' 3x3 layers read fewer than 16 channels: the default runs them as the implicit GEMM,
# which writes slices (more: Winograd's, which does not; the graph-level find asks the default).


@pytest.mark.parametrize(
    "k,options",
    [
        (3, {}),
        (3, {"gemm_splits": 3}),
        (3, {"precision": "fp16"}),
        (1, {}),  # the plain GEMM writes and reads
        (1, {"gemm_splits": 2}),
        (1, {"precision": "fp16"}),
        (3, {"conv_algorithm": "implicit_gemm"}),  # the 1x1 layers read with the implicit GEMM
        (3, {"conv_algorithm": "implicit_gemm", "gemm_splits": 3}),
        (3, {"conv_algorithm": "implicit_gemm", "precision": "fp16"}),
    ],
    ids=[
        "implicit",
        "implicit-split",
        "implicit-fp16",
        "gemm",
        "gemm-split",
        "gemm-fp16",
        "igemm-reads",
        "igemm-reads-split",
        "igemm-reads-fp16",
    ],
)
def test_dense_block_runs_in_place(runtime: str, k: int, options: dict[str, Any]) -> None:
    on = chain_on_and_off(dense_block(k=k, seed=1), runtime, 3, **options)
    if options.get("conv_algorithm") == "implicit_gemm":
        assert folded_nodes(on, "implicit_gemm+AFFINE+PITCH") == 3, on.delegate.profile().table()
    # Every layer's bottleneck but the first reads a link (the first reads the pool's copy).
    assert folded_nodes(on, "+PITCH") == 3, on.delegate.profile().table()


@pytest.mark.parametrize(
    "shape,growth,bottleneck,bn,k",
    [
        ((1, 6, 5, 6), 6, 7, True, 3),  # offsets and pitch not multiples of 4: scalar loads
        ((2, 7, 7, 8), 4, 12, True, 3),  # two images
        ((1, 8, 8, 16), 8, 12, False, 3),  # no batch normalization: the 1x1 reads the link
        ((1, 9, 9, 12), 8, 8, False, 1),  # 1x1 growth convolutions
    ],
    ids=["odd", "batch2", "no-bn", "k1"],
)
def test_dense_block_shapes(
    runtime: str,
    shape: tuple[int, int, int, int],
    growth: int,
    bottleneck: int,
    bn: bool,
    k: int,
) -> None:
    model = dense_block(shape, 4, growth, bottleneck, bn=bn, k=k, seed=2)
    chain_on_and_off(model, runtime, 3, gemm_splits=2)


def test_a_reader_off_the_gemms_cuts_the_chain(runtime: str) -> None:
    """The second concatenation's output also read by a MEAN: the chain ends there (one link),
    and the third starts another (two links)."""
    on = chain_on_and_off(dense_block(layers=5, mean_reader=1, seed=3), runtime, 3)
    assert op_nodes(on, "CONCATENATION") == 2, on.delegate.profile().table()


def test_a_partition_output_cuts_the_chain(runtime: str) -> None:
    on = chain_on_and_off(dense_block(layers=4, output_link=2, seed=4), runtime, 2)
    assert op_nodes(on, "CONCATENATION") == 2, on.delegate.profile().table()


def test_one_concatenation_is_no_chain(runtime: str) -> None:
    r = check_parity(dense_block(layers=1, seed=5), runtime, profiling=True, expect_delegated="all")
    assert folded_nodes(r, "+PITCH") == 0 and op_nodes(r, "CONCATENATION") == 1


def test_cost_model_counts_the_links(runtime: str) -> None:
    counts, launched = estimated_and_launched(dense_block(k=1, seed=6), runtime)
    assert counts and counts[0] == launched


@pytest.mark.parametrize("algorithm", ["auto", "implicit_gemm"])
def test_values_past_the_first_columns_are_not_read(runtime: str, algorithm: str) -> None:
    """The wider tensor's later columns hold other layers' values while a layer reads the first
    ones: large values there would show in its output if its loads strayed past them."""
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 6, 8))
    h = b.max_pool2d(x, 2, 1, "SAME")
    for _ in range(3):
        c = b.shape(h)[3]
        t = b.conv2d(h, b.rand((8, 1, 1, c)), None, 1, 1, "SAME", "RELU")
        y = b.conv2d(t, np.full((8, 3, 3, 8), 1e4, np.float32), None, 1, 1, "SAME", None)
        h = b.concat([h, y], 3)
    b.output(b.conv2d(h, b.rand((4, 1, 1, b.shape(h)[3])), None, 1, 1, "SAME", None))
    chain_on_and_off(b.build(), runtime, 2, conv_algorithm=algorithm)


@pytest.mark.parametrize("kind", ["clamp_node", "two_new", "direct"])
def test_links_of_other_forms(runtime: str, kind: str) -> None:
    """A layer whose new channels pass a RELU6 node (folded into its convolution, which writes
    what the node would), a layer adding two convolutions' channels at once, and a layer whose
    3x3 convolution reads the tensor so far itself (at the pitch) and writes into it."""
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 7, 6, 4 if kind == "direct" else 12))
    h = b.max_pool2d(x, 2, 1, "SAME")
    for _ in range(3):
        c = b.shape(h)[3]
        if kind == "direct":  # 4 + 3 x 3 channels: fewer than 16, the implicit GEMM's
            h = b.concat([h, b.conv2d(h, b.rand((3, 3, 3, c)), None, 1, 1, "SAME", None)], 3)
            continue
        t = b.conv2d(h, b.rand((8, 1, 1, c)), b.rand((8,), 0.2), 1, 1, "SAME", "RELU")
        y = b.conv2d(t, b.rand((6, 3, 3, 8)), b.rand((6,), 0.2), 1, 1, "SAME", None)
        if kind == "clamp_node":
            h = b.concat([h, b.relu6(y)], 3)
        else:
            z = b.conv2d(t, b.rand((5, 1, 1, 8)), None, 1, 1, "SAME", "RELU")
            h = b.concat([h, y, z], 3)
    b.output(b.conv2d(h, b.rand((4, 1, 1, b.shape(h)[3])), None, 1, 1, "SAME", None))
    on = chain_on_and_off(b.build(), runtime, 2)
    if kind == "direct":
        assert folded_nodes(on, "+CONCAT+PITCH") == 2, on.delegate.profile().table()
    if kind == "clamp_node":
        assert op_nodes(on, "RELU6") == 0, on.delegate.profile().table()
