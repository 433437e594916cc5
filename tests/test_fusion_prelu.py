"""PRELU with a slope per channel folded into the op before it (fusion/prelu.cc, AttachSlopes):
a convolution (any algorithm), a depthwise, or an ADD of operands of its size, applies the slopes
where it stores, after the activation and a residual ADD (kernels/common.cl's and binary.cl's
CHANNEL_SLOPES), so the PRELU runs no kernel and the value before it is never written.
MediaPipe's blocks (conv, PRELU, depthwise, conv, ADD, PRELU) are the shape. Against TFLite's
CPU kernels with the pass on and off: the implicit GEMM and the plain one, whole and split along
K, a folded depthwise and residual, an ADD, fp16 storage; and what must stay (a slope not per
channel, a value read elsewhere, a broadcasting ADD); every convolution algorithm, forced, the
plain GEMM's small-M kernel, Winograd with a residual under fp16, a grouped convolution, a
depthwise (whole channel runs and a tail, a depth multiplier, fp16), a FULLY_CONNECTED and a
sequence's ADD (the last axis' slopes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, op_nodes, pass_on_and_off
from parity import ParityResult, check_parity

from clgpu_delegate.modelgen import ModelBuilder

NO_PRELU = "affine,pad,clamp,epilogue,residual,views,squeeze,depthwise,expand"  # all but prelu


def _prelu_kernels(r: ParityResult) -> int:
    return op_nodes(r, "PRELU")


def _both(model: bytes, runtime: str, folded: int, **options: Any) -> ParityResult:
    """Parity with the pass on and off; on, `folded` PRELU nodes ran no kernel of their own and
    the invoke launched as many kernels fewer."""
    on = pass_on_and_off(model, runtime, NO_PRELU, "PRELU", "+PRELU", folded, **options)
    assert folded_nodes(on, "+PRELU") == folded
    return on


def _slopes(b: ModelBuilder, c: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    # Negative and positive slopes, so that a wrong channel shows.
    v = np.linspace(-0.5, 1.5, c).astype(np.float32)
    return v.reshape(shape) if shape else v.reshape(1, 1, c)


def _conv_prelu(
    shape: tuple[int, int, int, int], *, k: int = 1, stride: int = 1, out: int = 12, seed: int = 0
) -> bytes:
    """x -> conv (k x k) -> PRELU per channel -> conv 1x1."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.conv2d(x, b.rand((out, k, k, c)), b.rand((out,), 0.3), stride, stride, "SAME")
    h = b.prelu(h, _slopes(b, out))
    b.output(b.conv2d(h, b.rand((8, 1, 1, out)), b.rand((8,), 0.2)))
    return b.build()


def _mediapipe_block(shape: tuple[int, int, int, int], *, seed: int = 0) -> bytes:
    """conv 1x1 -> PRELU -> depthwise 3x3 -> conv 1x1 -> ADD(x) -> PRELU: MediaPipe's block."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2))
    h = b.prelu(h, _slopes(b, c))
    h = b.depthwise_conv2d(h, b.rand((1, 3, 3, c), 0.4), b.rand((c,), 0.1), 1, 1, "SAME")
    h = b.conv2d(h, b.rand((c, 1, 1, c)), b.rand((c,), 0.2))
    h = b.add(h, x)
    b.output(b.prelu(h, _slopes(b, c, (c,))))
    return b.build()


# Fewer than 16 input channels: the implicit GEMM or (1x1, stride 1) the plain one everywhere.
CASES = [
    ((1, 9, 9, 8), {"k": 3}),  # implicit GEMM
    ((1, 10, 12, 8), {"k": 3, "stride": 2, "out": 6}),  # channels not a multiple of 4
    ((1, 12, 12, 8), {"k": 1}),  # the plain GEMM of a 1x1
    ((2, 7, 7, 12), {"k": 1, "out": 16}),
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_per_channel_prelu_runs_inside_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], kw: Any
) -> None:
    _both(_conv_prelu(shape, seed=sum(shape), **kw), runtime, folded=1)


@pytest.mark.parametrize("k", [1, 3])
def test_split_gemms_apply_the_slopes_in_their_reduce(runtime: str, k: int) -> None:
    _both(_conv_prelu((1, 12, 12, 8), k=k, seed=k), runtime, folded=1, gemm_splits=2)


def test_a_mediapipe_block_takes_both_prelus(runtime: str) -> None:
    # The first after the expand's plain GEMM, the second after the ADD the depthwise GEMM took.
    on = _both(_mediapipe_block((1, 16, 16, 8), seed=3), runtime, folded=2)
    assert folded_nodes(on, "+DEPTHWISE+ADD+PRELU") == 1


def test_half_storage_reads_its_slopes_as_half(runtime: str) -> None:
    _both(_mediapipe_block((1, 12, 12, 8), seed=5), runtime, folded=2, precision="fp16")


@pytest.mark.parametrize("c,act", [(6, None), (8, "RELU_N1_TO_1")])
def test_an_add_of_operands_of_its_size_takes_the_slopes(
    runtime: str, c: int, act: str | None
) -> None:
    # An ADD no convolution took (both operands inputs): its element-wise kernel applies them,
    # after its own clamp; channels not a multiple of 4 cross the kernel's runs of four.
    b = ModelBuilder(seed=c)
    x, y = b.input("x", (1, 5, 3, c)), b.input("y", (1, 5, 3, c))
    b.output(b.prelu(b.add(x, y, act), _slopes(b, c)))
    on = _both(b.build(), runtime, folded=1)
    assert folded_nodes(on, "elementwise+PRELU") == 1


def test_a_broadcasting_add_keeps_its_prelu(runtime: str) -> None:
    b = ModelBuilder(seed=12)
    x = b.input("x", (1, 4, 4, 8))
    b.output(b.prelu(b.add(x, b.rand((1, 1, 1, 8), 0.5)), _slopes(b, 8)))
    _unfolded(b.build(), runtime)


def test_one_slope_stays_with_the_epilogue_fold(runtime: str) -> None:
    # PyTorch's nn.PReLU(): LEAKY_RELU's epilogue, which every op that clamps takes.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 8, 8, 8))
    h = b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "SAME")
    b.output(b.prelu(h, np.full((1, 1, 8), 0.25, np.float32)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert _prelu_kernels(r) == 0 and folded_nodes(r, "+PRELU") == 0


def _unfolded(model: bytes, runtime: str) -> None:
    r = check_parity(model, runtime, expect_delegated="all", profiling=True)
    assert folded_nodes(r, "+PRELU") == 0 and _prelu_kernels(r) == 1


def test_slopes_not_per_channel_stay(runtime: str) -> None:
    # A slope per pixel and channel: not the store's per-column vector.
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 4, 4, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    b.output(b.prelu(h, b.rand((4, 4, 8), 0.5)))
    _unfolded(b.build(), runtime)


def test_a_value_read_elsewhere_stays(runtime: str) -> None:
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "SAME")
    p = b.prelu(h, _slopes(b, 8))
    b.output(b.add(p, h))
    _unfolded(b.build(), runtime)


# Every convolution algorithm stores through the slopes (kernels/common.cl's SLOPED): forced
# here, on a 3x3 layer of 16 channels (Winograd's own choice on this device, the cost model's
# view). F(4x4)'s tiles overhang a 10x10 output; 12 outputs cross the stores' runs of four.
# With 6 outputs the blocked kernel stores one channel at a time instead of four.
ALGORITHMS = [
    *((a, 12) for a in ["direct", "direct_blocked", "winograd", "winograd4", "winograd4_fused"]),
    ("direct_blocked", 6),
]


@pytest.mark.parametrize("algorithm,out", ALGORITHMS)
def test_every_convolution_algorithm_takes_the_slopes(
    runtime: str, algorithm: str, out: int
) -> None:
    model = _conv_prelu((1, 10, 10, 16), k=3, out=out, seed=len(algorithm) + out)
    _both(model, runtime, folded=1, conv_algorithm=algorithm)


@pytest.mark.parametrize("algorithm", ["winograd", "winograd4"])
def test_winograd_with_a_residual_and_half_storage(runtime: str, algorithm: str) -> None:
    # The output transform adds the residual, clamps, then applies the slopes; F(2x2) keeps
    # half intermediates, F(4x4) float ones.
    b = ModelBuilder(seed=21)
    x = b.input("x", (1, 9, 11, 16))
    h = b.conv2d(x, b.rand((16, 3, 3, 16), 0.3), b.rand((16,), 0.2), 1, 1, "SAME")
    h = b.add(h, x, "RELU6")
    b.output(b.prelu(h, _slopes(b, 16)))
    for precision in ("fp32", "fp16"):
        on = _both(b.build(), runtime, folded=1, conv_algorithm=algorithm, precision=precision)
        assert folded_nodes(on, "+ADD+PRELU") == 1


def test_a_grouped_convolution_takes_the_slopes(runtime: str) -> None:
    # Only the direct algorithm runs groups: slopes by output channel across the groups.
    b = ModelBuilder(seed=22)
    x = b.input("x", (1, 7, 7, 8))
    h = b.conv2d(x, b.rand((12, 3, 3, 4)), b.rand((12,), 0.2), 1, 1, "SAME")
    b.output(b.prelu(h, _slopes(b, 12)))
    _both(b.build(), runtime, folded=1)


def _depthwise_prelu(shape: tuple[int, int, int, int], mult: int = 1, seed: int = 0) -> bytes:
    """depthwise 3x3 -> PRELU per channel -> conv 1x1: MobileFaceNet's depthwise, BN, PReLU (the
    PRELU between them keeps the depthwise out of the 1x1's GEMM)."""
    b = ModelBuilder(seed=seed)
    oc = shape[3] * mult
    x = b.input("x", shape)
    h = b.depthwise_conv2d(x, b.rand((1, 3, 3, oc), 0.4), b.rand((oc,), 0.1), 1, 1, "SAME", mult)
    h = b.prelu(h, _slopes(b, oc))
    b.output(b.conv2d(h, b.rand((8, 1, 1, oc)), b.rand((8,), 0.2)))
    return b.build()


# Channels in runs of four (the kernel's vector store), a tail of two, a depth multiplier.
@pytest.mark.parametrize("shape,mult", [((1, 9, 9, 16), 1), ((1, 7, 8, 6), 1), ((1, 6, 6, 4), 3)])
def test_a_depthwise_takes_the_slopes(
    runtime: str, shape: tuple[int, int, int, int], mult: int
) -> None:
    on = _both(_depthwise_prelu(shape, mult, seed=shape[3] + mult), runtime, folded=1)
    assert folded_nodes(on, "depthwise_fast+PRELU") == 1
    counts, launched = estimated_and_launched(_depthwise_prelu(shape, mult), runtime)
    assert counts and counts[0] == launched


def test_half_storage_depthwise_slopes(runtime: str) -> None:
    _both(_depthwise_prelu((1, 8, 8, 12), seed=31), runtime, folded=1, precision="fp16")


# A dense layer's [M, N] (batch 1: the small-M kernel; 16 rows: tiled; split along K) and a
# sequence's [1, T, C] (keep_num_dims): the slope of the last axis' index.
@pytest.mark.parametrize(
    "rows,keep,options",
    [(1, False, {}), (16, False, {}), (16, False, {"gemm_splits": 2}), (5, True, {})],
)
def test_a_fully_connected_takes_the_slopes(
    runtime: str, rows: int, keep: bool, options: Any
) -> None:
    b = ModelBuilder(seed=rows + keep)
    x = b.input("x", (1, rows, 48) if keep else (rows, 48))
    h = b.fully_connected(x, b.rand((20, 48)), b.rand((20,), 0.2), keep_num_dims=keep)
    b.output(b.prelu(h, np.linspace(-0.5, 1.5, 20).astype(np.float32)))
    on = _both(b.build(), runtime, folded=1, **options)
    assert folded_nodes(on, "+PRELU") == 1


def test_a_sequences_add_takes_the_slopes(runtime: str) -> None:
    # [1, T, C] operands of one size: binary_same's slope of element i's channel i % C.
    b = ModelBuilder(seed=24)
    x, y = b.input("x", (1, 7, 10)), b.input("y", (1, 7, 10))
    b.output(b.prelu(b.add(x, y), np.linspace(-0.5, 1.5, 10).astype(np.float32)))
    _both(b.build(), runtime, folded=1)


def test_the_small_m_gemm_takes_the_slopes(runtime: str) -> None:
    # A 1x1 over two pixels runs the plain GEMM's small-M kernel (iris_landmark's last layers).
    b = ModelBuilder(seed=23)
    x = b.input("x", (1, 1, 2, 16))
    h = b.conv2d(x, b.rand((12, 1, 1, 16)), b.rand((12,), 0.2))
    b.output(b.prelu(h, _slopes(b, 12)))
    on = _both(b.build(), runtime, folded=1)
    assert any("gemv" in k.algorithm or k.kernel == "gemm_nt_small_m"
               for k in on.delegate.profile().kernels), on.delegate.profile().table()
    counts, launched = estimated_and_launched(b.build(), runtime)
    assert counts and counts[0] == launched


@pytest.mark.parametrize("model", ["mediapipe", "winograd"])
def test_the_cost_model_counts_the_folded_launches(runtime: str, model: str) -> None:
    # decisions' estimate counts the kernels the partition launches.
    m = (
        _mediapipe_block((1, 16, 16, 8), seed=8)
        if model == "mediapipe"
        else _conv_prelu((1, 12, 12, 16), k=3, seed=8)
    )
    counts, launched = estimated_and_launched(m, runtime)
    assert counts and counts[0] == launched


def _one_slope_residual_block(
    shape: tuple[int, int, int, int], *, k: int = 3, act: str | None = None, seed: int = 0
) -> bytes:
    """conv -> PRELU -> conv -> ADD(x) -> PRELU, each PRELU of one slope: a residual block as
    PyTorch's nn.PReLU() converts (bench/small_models.py's prelu_cnn_shared)."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    h = b.conv2d(x, b.rand((c, k, k, c)), b.rand((c,), 0.2), 1, 1, "SAME")
    h = b.prelu(h, np.full((1, 1, 1), 0.25, np.float32))
    h = b.conv2d(h, b.rand((c, k, k, c)), b.rand((c,), 0.2), 1, 1, "SAME")
    h = b.add(h, x, act)
    b.output(b.prelu(h, np.full((1, 1, 1), -0.3, np.float32)))
    return b.build()


@pytest.mark.parametrize(
    "shape,kw,options",
    [
        ((1, 9, 9, 8), {}, {}),  # the implicit GEMM
        ((1, 8, 8, 8), {"k": 1}, {}),  # the plain GEMM of a 1x1
        ((1, 12, 12, 32), {}, {}),  # Winograd on this device
        ((1, 9, 9, 8), {"act": "RELU6"}, {}),  # the ADD's clamp, then the slope
        ((1, 9, 9, 8), {}, {"conv_algorithm": "direct"}),
    ],
)
def test_an_adds_one_slope_prelu_moves_with_it_into_the_convolution(
    runtime: str, shape: tuple[int, int, int, int], kw: Any, options: Any
) -> None:
    """The epilogue fold gives the block's last PRELU to the ADD; the residual fold then takes
    the ADD into its convolution with that epilogue (applied after the residual and the ADD's
    clamp, as the CPU does): one launch for conv, ADD and PRELU. Before, the ADD kept a launch
    of its own while the cost model counted it folded."""
    model = _one_slope_residual_block(shape, seed=shape[1] + shape[3], **kw)
    r = check_parity(model, runtime, expect_delegated="all", profiling=True, **options)
    assert op_nodes(r, "ADD") == 0 and _prelu_kernels(r) == 0, r.delegate.profile().table()
    assert folded_nodes(r, "+ADD") == 1
    counts, launched = estimated_and_launched(model, runtime)
    assert counts and counts[0] == launched
