"""A residual ADD folded into the CONV_2D that produces one of its operands (fusion/attach.h): the
conv writes act(conv + bias + residual) and the ADD runs no kernel. Every case matches stock
TFLite CPU with fusion on and off (option fuse_add), and the profile shows whether it happened:
the fused conv's algorithm ends in "+ADD", the ADD has no kernel, the invoke launches fewer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, pass_on_and_off
from folds import launches as _launches
from parity import CONV_ALGORITHMS, ParityResult, check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.runtime import make_interpreter

ACTIVATIONS = [None, "RELU", "RELU6", "RELU_N1_TO_1"]
FP16_RTOL = 1e-2  # of each output's range, as tests/test_fp16.py
NO_RESIDUAL = "affine,pad,clamp,epilogue,views,squeeze,gate,depthwise,prelu,expand"  # all but it


def _nodes_run(r: ParityResult) -> set[int]:
    return {k.node for k in r.delegate.profile().kernels}


def _fused_nodes(r: ParityResult) -> set[int]:
    # "+ADD", or "+ADD+PRELU" with slopes folded after it.
    return {k.node for k in r.delegate.profile().kernels if "+ADD" in k.algorithm}


def _add_nodes_run(r: ParityResult) -> set[int]:
    return {k.node for k in r.delegate.profile().kernels if k.op == "ADD"}


def _tolerance(model: bytes, runtime: str, precision: str) -> dict[str, float]:
    if precision != "fp16":
        return {}
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    outs = run(ref, random_inputs(ref.get_input_details(), 0))
    peak = max(float(np.abs(o).max(initial=0.0)) for o in outs)
    return {"rtol": FP16_RTOL, "atol": FP16_RTOL * max(peak, 1e-3)}


def check_fusion(
    model: bytes,
    runtime: str,
    fused: int,
    precision: str = "fp32",
    same_commands: bool = True,
    **options: Any,
) -> ParityResult:
    """Parity with fusion on and off, every node delegated; with it on, exactly `fused` ADDs
    ran inside their conv. same_commands: the invoke otherwise enqueued the same commands
    (not so in chunks, whose box copies differ), so `fused` launches fewer."""
    tol = _tolerance(model, runtime, precision)
    common = {"expect_delegated": "all", "profiling": True, "precision": precision, **tol}
    on = check_parity(model, runtime, **common, **options)
    off = check_parity(model, runtime, **common, fuse_add=False, **options)
    assert not _fused_nodes(off)
    folded = _add_nodes_run(off) - _add_nodes_run(on)
    assert len(_fused_nodes(on)) == fused and len(folded) == fused, on.delegate.profile().table()
    # Every ADD that ran no kernel was folded: none was dropped.
    assert _add_nodes_run(on) | folded == _add_nodes_run(off)
    if same_commands:
        assert _launches(on) == _launches(off) - fused
    return on


def block(
    shape: tuple[int, int, int, int] = (1, 10, 9, 24),
    out_channels: int | None = None,
    kernel: int = 1,
    activation: str | None = None,
    residual: str = "input",
    conv_first: bool = False,
    seed: int = 0,
) -> bytes:
    """x -> CONV_2D (no activation) -> ADD(residual, conv) with the ADD's activation.
    residual: "input" (the conv's own input), "second_input", "const" (same shape) or "conv"
    (a RELU conv of x computed before it)."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    oc = out_channels or shape[3]
    out = (*shape[:3], oc)
    if residual == "input":
        r = x
    elif residual == "second_input":
        r = b.input("r", out)
    elif residual == "const":
        r = b.const(b.rand(out, scale=1.0))
    else:
        r = b.conv2d(x, b.rand((oc, 3, 3, shape[3])), b.rand((oc,)), activation="RELU")
    y = b.conv2d(x, b.rand((oc, kernel, kernel, shape[3])), b.rand((oc,)))
    b.output(b.add(y, r, activation) if conv_first else b.add(r, y, activation))
    return b.build()


@pytest.mark.parametrize("conv_first", [False, True], ids=["residual_lhs", "conv_lhs"])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a or "NONE")
def test_1x1_conv_then_add_each_activation(
    activation: str | None, conv_first: bool, runtime: str
) -> None:
    check_fusion(block(activation=activation, conv_first=conv_first), runtime, fused=1)


@pytest.mark.parametrize("residual", ["second_input", "const", "conv"])
def test_residual_sources(residual: str, runtime: str) -> None:
    check_fusion(block((1, 7, 8, 20), 12, residual=residual, activation="RELU"), runtime, fused=1)


def test_residual_and_output_at_the_partition_boundary(
    transfer: dict[str, str], runtime: str
) -> None:
    # The residual is a partition input and the ADD's output a partition output, through
    # every transfer path (copies, zero-copy host memory).
    model = block((1, 7, 8, 20), 20, residual="second_input", activation="RELU_N1_TO_1")
    check_fusion(model, runtime, fused=1, **transfer)


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS)
def test_every_conv_algorithm_adds_the_residual(algorithm: str, runtime: str) -> None:
    # 3x3 (1x1 for the GEMM, which applies only there), odd sizes and channel counts.
    kernel = 1 if algorithm == "gemm" else 3
    model = block((2, 11, 9, 17), 19, kernel=kernel, activation="RELU6", residual="second_input")
    r = check_fusion(model, runtime, fused=1, conv_algorithm=algorithm)
    if algorithm != "auto":
        algos = {k.algorithm for k in r.delegate.profile().kernels}
        assert algos == {algorithm + "+ADD"}, algos


@pytest.mark.parametrize(("algorithm", "kernel"), [("gemm", 1), ("implicit_gemm", 3)])
def test_split_k_reduce_adds_the_residual(algorithm: str, kernel: int, runtime: str) -> None:
    # K = 96 (x 9) in 3 slices: the residual is added once, by the reduce, not by each slice.
    model = block((1, 7, 7, 96), 40, kernel=kernel, activation="RELU", residual="second_input")
    r = check_fusion(model, runtime, fused=1, conv_algorithm=algorithm, gemm_splits=3)
    ran = {k.kernel for k in r.delegate.profile().kernels}
    assert "gemm_splitk_reduce" in ran, ran


@pytest.mark.parametrize("shape", [(1, 1, 1, 40), (6, 1, 1, 40), (2, 2, 2, 40)])
def test_small_m_gemv_adds_the_residual(shape: tuple[int, int, int, int], runtime: str) -> None:
    # A 1x1 conv over at most 8 output pixels (a squeeze-excite conv on a 1x1 map) runs as the
    # GEMV kernel, which adds a folded residual before the activation.
    model = block(shape, 40, kernel=1, activation="RELU6", residual="second_input")
    r = check_fusion(model, runtime, fused=1, conv_algorithm="gemm")
    assert {k.kernel for k in r.delegate.profile().kernels} == {"gemm_nt_small_m"}


def test_conv_output_read_elsewhere_is_not_fused(runtime: str) -> None:
    # The conv's output feeds a second ADD too, or leaves the graph: it must be written.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 6, 7, 8))
    y = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,)))
    z = b.add(x, y, "RELU")
    b.output(b.add(y, z))
    check_fusion(b.build(), runtime, fused=0)

    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 7, 8))
    y = b.conv2d(x, b.rand((8, 3, 3, 8)))
    b.output(b.add(x, y))
    b.output(y)
    check_fusion(b.build(), runtime, fused=0)


def test_conv_with_its_own_activation_is_not_fused(runtime: str) -> None:
    # act(conv) + residual is not act(conv + residual).
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 6, 7, 8))
    b.output(b.add(x, b.conv2d(x, b.rand((8, 1, 1, 8)), activation="RELU")))
    check_fusion(b.build(), runtime, fused=0)


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_both_operands_convs(order: str, runtime: str) -> None:
    # The later conv takes the earlier one's output as its residual, whichever ADD operand
    # it is (ResNet's projection shortcut).
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 9, 8, 12))
    a = b.conv2d(x, b.rand((16, 1, 1, 12)), b.rand((16,)))
    c = b.conv2d(x, b.rand((16, 3, 3, 12)), b.rand((16,)))
    b.output(b.add(a, c, "RELU") if order == "ab" else b.add(c, a, "RELU"))
    r = check_fusion(b.build(), runtime, fused=1)
    assert _fused_nodes(r) == {1}


def test_residual_produced_after_the_conv_is_fused_once_the_conv_waits(runtime: str) -> None:
    # The linear conv comes first in the model; the other operand (a RELU conv) only after it.
    # The partition runs the linear conv after the other (fusion/pass.h, OrderForFolds), which
    # then takes it as its residual.
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 9, 8, 12))
    a = b.conv2d(x, b.rand((16, 1, 1, 12)), b.rand((16,)))
    c = b.conv2d(x, b.rand((16, 3, 3, 12)), b.rand((16,)), activation="RELU")
    b.output(b.add(a, c))
    on = check_fusion(b.build(), runtime, fused=1)
    assert _fused_nodes(on) == {0}


def _mediapipe_block(shortcut: str, slopes: bool, seed: int) -> bytes:
    """MediaPipe's downsampling block (BlazeFace, iris and palm landmarks) in its converter's
    node order: x -> depthwise stride 2 -> 1x1 conv -> ADD(conv, shortcut(x)) [-> PRELU], the
    shortcut (a 2x2 MAX_POOL_2D, then a PAD of its channels to the conv's) computed after the
    conv."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 12, 10, 8))
    out = 16 if "pad" in shortcut else 8
    h = b.depthwise_conv2d(x, b.rand((1, 3, 3, 8)), b.rand((8,)), stride=2)
    y = b.conv2d(h, b.rand((out, 1, 1, 8), scale=0.3), b.rand((out,)))
    s = b.max_pool2d(x, 2, 2)
    if "pad" in shortcut:
        s = b.pad(s, [[0, 0], [0, 0], [0, 0], [0, out - 8]])
    z = b.add(y, s)
    if slopes:
        z = b.prelu(z, np.linspace(-0.5, 1.0, out).astype(np.float32).reshape(1, 1, out))
    b.output(z)
    return b.build()


@pytest.mark.parametrize(
    "shortcut,slopes", [("pool+pad", True), ("pool+pad", False), ("pool", False)]
)
def test_mediapipe_shortcut_after_the_conv(shortcut: str, slopes: bool, runtime: str) -> None:
    model = _mediapipe_block(shortcut, slopes, seed=len(shortcut))
    on = pass_on_and_off(model, runtime, NO_RESIDUAL, "ADD", "+ADD", folded=1)
    assert _fused_nodes(on) == {1}  # the 1x1 conv, with the depthwise before it


def test_the_cost_model_counts_the_reordered_fold(runtime: str) -> None:
    counts, launched = estimated_and_launched(_mediapipe_block("pool+pad", True, 5), runtime)
    assert counts and counts[0] == launched


def test_chained_blocks(runtime: str) -> None:
    # The second block's residual is the first block's folded ADD output.
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 8, 8, 16))
    for _ in range(3):
        y = b.conv2d(x, b.rand((16, 1, 1, 16), scale=0.2), b.rand((16,)))
        x = b.add(x, y, "RELU6")
    b.output(x)
    check_fusion(b.build(), runtime, fused=3)


@pytest.mark.parametrize(
    "other", [(16,), (1, 1, 1, 16), (1, 9, 1, 16)], ids=["channel_const", "1x1x1", "column"]
)
def test_broadcast_add_is_not_fused(other: tuple[int, ...], runtime: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 9, 7, 16))
    y = b.conv2d(x, b.rand((16, 1, 1, 16)), b.rand((16,)))
    r = b.const(b.rand(other, scale=1.0)) if len(other) == 1 else b.input("r", other)
    b.output(b.add(y, r, "RELU"))
    check_fusion(b.build(), runtime, fused=0)


@pytest.mark.parametrize(
    "algorithm", ["gemm", "implicit_gemm", "winograd4", "direct_blocked", "winograd4_fused"]
)
def test_fp16_storage(algorithm: str, runtime: str) -> None:
    kernel = 1 if algorithm == "gemm" else 3
    model = block((1, 10, 11, 20), 20, kernel=kernel, activation="RELU", residual="conv")
    check_fusion(model, runtime, fused=1, precision="fp16", conv_algorithm=algorithm)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("algorithm", ["gemm", "implicit_gemm", "winograd", "direct"])
def test_in_chunks(algorithm: str, precision: str, runtime: str) -> None:
    # Tensors over the lowered max allocation: the fused conv runs in chunks, its residual
    # copied box by box like the output it is added to.
    kernel = 1 if algorithm == "gemm" else 3
    model = block((2, 12, 11, 16), 16, kernel=kernel, activation="RELU6", residual="second_input")
    limit = 4096 if precision == "fp32" else 2048
    r = check_fusion(
        model,
        runtime,
        fused=1,
        precision=precision,
        same_commands=False,
        conv_algorithm=algorithm,
        max_alloc_bytes=limit,
    )
    mem = r.delegate.memory()
    assert mem.split_tensors >= 2 and mem.chunked_ops == 1 and mem.chunks > 1, mem
    assert {k.kernel for k in r.delegate.profile().kernels} >= {"copy_in", "copy_out"}


def test_resize_that_makes_the_add_broadcast_unfuses(runtime: str) -> None:
    # Claimed with batch 1 against a constant [1, H, W, C]: folded. At batch 3 the ADD
    # broadcasts the constant, so the next plan runs it on its own; back at 1 it folds again.
    model = block((1, 6, 5, 8), 8, residual="const", activation="RELU")
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    for batch, folded in ((1, True), (3, False), (1, True)):
        for interp in (it, ref):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 6, 5, 8))
            interp.allocate_tensors()
        d.reset_profile()
        inputs = random_inputs(ref.get_input_details(), batch)
        compare(run(it, inputs), run(ref, inputs), 1e-4, None, f" (batch {batch})")
        ops = {k.op for k in d.profile().kernels}
        assert ("ADD" not in ops) == folded, d.profile().table()
    assert d.delegated_nodes() == [0, 1]


def test_capture_tensors_keeps_the_conv_output(runtime: str) -> None:
    # Debug capture reads every activation back, so nothing is folded away.
    r = check_parity(block(), runtime, expect_delegated="all", capture_tensors=True)
    captured = r.delegate.captured()
    assert len(captured) == 3, sorted(captured)  # x, the conv's output, the ADD's output


@pytest.mark.parametrize(
    ("name", "adds", "depthwise"), [("mobilenet_v2", 10, 17), ("resnet50", 16, 0)]
)
def test_zoo_residual_networks(
    name: str, adds: int, depthwise: int, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every residual ADD of the network folds into its projection conv (and every depthwise
    # convolution of MobileNetV2 into that conv's GEMM: tests/test_fusion_depthwise.py). The
    # later layers' taps, computed again for each of up to ten tiles of outputs, would cost this
    # machine's 2-core device more than their launch (DepthwiseFoldPays, tested there): the
    # research knob folds every pair, so that this counts the fold's structure, not its bound.
    monkeypatch.setenv("CLGPU_TRIAL_DW_FOLD_ALWAYS", "1")
    model = zoo.build(name, size=48, num_classes=37, softmax=False)
    r = check_parity(model, runtime, profiling=True)
    off = check_parity(model, runtime, profiling=True, fuse_add=False)
    assert len(_fused_nodes(r)) == adds and not _add_nodes_run(r), r.delegate.profile().table()
    assert len(_add_nodes_run(off)) == adds
    dw = {k.node for k in r.delegate.profile().kernels if "+DEPTHWISE" in k.algorithm}
    assert len(dw) == depthwise, r.delegate.profile().table()
    # Nodes that ran kernels of their own (a GPU's split GEMMs differ in launches per node). A
    # GPU's block kernel also runs a block's expand conv (kernels/inverted_residual.cl): one
    # node fewer per "+EXPAND" kernel; the CPU device's plans have none.
    expand = {k.node for k in r.delegate.profile().kernels if "+EXPAND" in k.algorithm}
    assert len(_nodes_run(r)) == len(_nodes_run(off)) - adds - depthwise - len(expand)
    if depthwise == 0:
        assert _launches(r) == _launches(off) - adds
