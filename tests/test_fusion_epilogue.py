"""Element-wise ops folded into the kernels of the op producing their input (fusion/attach.h,
AttachEpilogue): swish (LOGISTIC + MUL), HARD_SWISH, LOGISTIC, TANH, GELU, ELU, LEAKY_RELU and a
PRELU of one slope after convs (every algorithm), depthwise, FC, binary ops, pools and transpose
convs, and the MAXIMUM / MINIMUM / MUL / ADD / SUB / DIV of a constant scalar after them
(PostClamp). Each case matches stock TFLite CPU with fusion on and off (option fuse_add) and
launches that many fewer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tflite
from folds import launches as _launches
from parity import CONV_ALGORITHMS, ParityResult, check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def check_folds(model: bytes, runtime: str, folded: int, **options: Any) -> ParityResult:
    common = {"expect_delegated": "all", "profiling": True, **options}
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, **common, fuse_add=False)
    assert _launches(on) == _launches(off) - folded, on.delegate.profile().table()
    return on


def unary(b: ModelBuilder, name: str, x: int) -> int:
    options: dict[str, Any] = {}
    code = name
    if name == "LEAKY_RELU":
        options = {"options": "LeakyReluOptions", "Alpha": 0.15}
    elif name.startswith("GELU"):
        code = "GELU"
        options = {"options": "GeluOptions", "Approximate": name == "GELU_TANH"}
    return b._op(getattr(tflite.BuiltinOperator, code), [x], [b.shape(x)], **options)[0]


def epilogue(b: ModelBuilder, name: str, y: int) -> tuple[int, int]:
    """The epilogue after y, and the number of nodes it folds."""
    if name == "SWISH":
        return b.mul(y, b.logistic(y)), 2
    if name == "SWISH_REVERSED":
        return b.mul(b.logistic(y), y), 2
    return unary(b, name, y), 1


KINDS = [
    "SWISH",
    "SWISH_REVERSED",
    "HARD_SWISH",
    "LOGISTIC",
    "TANH",
    "GELU",
    "GELU_TANH",
    "ELU",
    "LEAKY_RELU",
]
PRODUCERS: dict[str, Callable[[ModelBuilder, int], int]] = {
    "conv": lambda b, x: b.conv2d(x, b.rand((6, 3, 3, 4)), activation="RELU6"),
    "depthwise": lambda b, x: b.depthwise_conv2d(x, b.rand((1, 3, 3, 4))),
    "fully_connected": lambda b, x: b.fully_connected(x, b.rand((6, 4)), keep_num_dims=True),
    "mul_broadcast": lambda b, x: b.mul(x, b.rand((4,), 1.0)),
    "avg_pool": lambda b, x: b.avg_pool2d(x, 2, 1),
    "transpose_conv": lambda b, x: b.transpose_conv(x, b.rand((3, 2, 2, 4)), (14, 12)),
}


def _model(producer: str, kind: str, shape: tuple[int, ...] = (1, 7, 6, 4)) -> tuple[bytes, int]:
    b = ModelBuilder(seed=5)
    x = b.input("x", shape)
    y, n = epilogue(b, kind, PRODUCERS[producer](b, b.mul(x, x)))
    b.output(y)
    return b.build(), n


# Every kind after a conv; after the other producers, swish (two nodes, a vector store in some
# kernels) and LEAKY_RELU (its alpha as a build define): each kind's code is the same macro.
# Depthwise stores float4 vectors: HARD_SWISH (MobileNetV3's) and ELU (a vector select) there too.
CASES = (
    [("conv", k) for k in KINDS]
    + [(p, k) for p in PRODUCERS if p != "conv" for k in ("SWISH", "LEAKY_RELU")]
    + [("depthwise", "HARD_SWISH"), ("depthwise", "ELU")]
)


@pytest.mark.parametrize(("producer", "kind"), CASES)
def test_epilogue_folds_into_its_producer(producer: str, kind: str, runtime: str) -> None:
    model, n = _model(producer, kind)
    check_folds(model, runtime, folded=n)


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS)
def test_swish_folds_into_every_conv_algorithm(algorithm: str, runtime: str) -> None:
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 12, 12, 8))
    y, n = epilogue(b, "SWISH", b.conv2d(x, b.rand((8, 3, 3, 8))))
    b.output(b.add(y, x))
    check_folds(b.build(), runtime, folded=n, conv_algorithm=algorithm)


def test_swish_stays_when_the_logistic_is_read_elsewhere(runtime: str) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)))
    s = b.logistic(y)
    b.output(b.mul(y, s))
    b.output(s)
    # The LOGISTIC's output is a graph output: only nothing folds but the partition is whole.
    check_folds(b.build(), runtime, folded=0)


def test_epilogue_with_fp16_storage_and_chunks(runtime: str) -> None:
    model, n = _model("conv", "SWISH", (1, 16, 16, 4))
    check_folds(model, runtime, folded=n, precision="fp16", rtol=1e-2, atol=3e-2)
    r = check_parity(model, runtime, expect_delegated="all", max_alloc_bytes=2048)
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_squeeze_excite_with_swish_is_one_partition(runtime: str) -> None:
    # EfficientNet's block: conv + swish, depthwise + swish, MEAN -> conv + swish -> conv ->
    # LOGISTIC -> MUL, projection conv. Seven nodes fold as epilogues, the two dense ops of the
    # squeeze into the MEAN (ops/squeeze.h), and the gate's MUL into the projection
    # (fusion/gate.cc).
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 10, 10, 8))
    y, _ = epilogue(b, "SWISH", b.conv2d(x, b.rand((16, 1, 1, 8))))
    y, _ = epilogue(b, "SWISH", b.depthwise_conv2d(y, b.rand((1, 3, 3, 16))))
    s = b.mean(y, [1, 2], keep_dims=True)
    s, _ = epilogue(b, "SWISH", b.conv2d(s, b.rand((4, 1, 1, 16))))
    s = b.logistic(b.conv2d(s, b.rand((16, 1, 1, 4))))
    b.output(b.conv2d(b.mul(y, s), b.rand((8, 1, 1, 16))))
    r = check_folds(b.build(), runtime, folded=10)
    assert len(r.partitions) == 1


@pytest.mark.parametrize("kind", ["GELU", "TANH"])
def test_epilogue_folds_through_reshapes(kind: str, runtime: str) -> None:
    # FC -> RESHAPE -> RESHAPE -> unary (Keras' Dense on a 3-D input): the FC writes the
    # activated values where the unary op's output is; both RESHAPEs and the unary run nothing.
    b = ModelBuilder(seed=13)
    x = b.input("x", (6, 8))
    y = b.fully_connected(x, b.rand((10, 8)), b.rand((10,)))
    y = b.reshape(b.reshape(y, (2, 3, 10)), (3, 2, 10))
    u = unary(b, kind, y)
    b.output(b.mul(u, u))
    r = check_folds(b.build(), runtime, 1)
    assert sorted(k.op for k in r.delegate.profile().kernels) == ["FULLY_CONNECTED", "MUL"]


def test_epilogue_stays_when_the_reshape_is_read_elsewhere(runtime: str) -> None:
    b = ModelBuilder(seed=14)
    x = b.input("x", (6, 8))
    y = b.reshape(b.fully_connected(x, b.rand((10, 8))), (2, 3, 10))
    b.output(unary(b, "GELU", y))
    b.output(b.add(y, 1.0))
    check_folds(b.build(), runtime, 0)


def _one_kernel_and_reference(model: bytes, x: np.ndarray, runtime: str) -> list[np.ndarray]:
    """The output delegated (every node, one kernel per invoke) and from TFLite's reference
    kernels, for one input."""
    outs = []
    for delegated in (True, False):
        d = clgpu_delegate.load(partitioning="all", profiling=True) if delegated else None
        it = make_interpreter(model, [d] if d else None, runtime=runtime, reference=True)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
        if d is not None:
            assert all(n.delegated for n in d.decisions())
            assert sum(p.kernels_per_invoke for p in d.profile().partitions) == 1
    return outs


@pytest.mark.parametrize("alpha", [float("inf"), float("-inf"), float("nan"), 0.0])
def test_leaky_relu_with_a_non_finite_alpha_folds_and_matches(alpha: float, runtime: str) -> None:
    # The alpha becomes a build define: a non-finite one must still be an OpenCL C literal, and
    # 0 must be defined too.
    b = ModelBuilder(seed=5)
    y = b.conv2d(b.input("x", (1, 7, 6, 4)), b.rand((6, 3, 3, 4)))
    opts = {"options": "LeakyReluOptions", "Alpha": alpha}
    b.output(b._op(tflite.BuiltinOperator.LEAKY_RELU, [y], [b.shape(y)], **opts)[0])
    model = b.build()
    x = np.random.default_rng(0).standard_normal((1, 7, 6, 4)).astype(np.float32)
    x[0, 0, 0, 0] = 0.0
    outs = _one_kernel_and_reference(model, x, runtime)
    if alpha != 0:
        assert not np.isfinite(outs[1]).all()  # the case reaches the non-finite products
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)


# A PRELU of one slope (PyTorch's nn.PReLU() default, however the converter shapes its alpha)
# is a LEAKY_RELU epilogue; a slope per channel keeps its own kernel.
@pytest.mark.parametrize("producer", ["conv", "depthwise", "fully_connected"])
@pytest.mark.parametrize("alpha_shape", [(1,), (1, 1, 1), (1, 1, 6)])
def test_prelu_of_one_slope_folds(
    producer: str, alpha_shape: tuple[int, ...], runtime: str
) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 7, 6, 4))
    y = PRODUCERS[producer](b, b.mul(x, x))
    c = 4 if producer == "depthwise" else 6
    alpha = np.full(alpha_shape[:-1] + ((c if alpha_shape[-1] > 1 else 1),), 0.2, np.float32)
    b.output(b.prelu(y, alpha))
    check_folds(b.build(), runtime, 1)


def test_prelu_per_channel_stays_and_zero_matches(runtime: str) -> None:
    b = ModelBuilder(seed=8)
    y = b.conv2d(b.input("x", (1, 7, 6, 4)), b.rand((6, 3, 3, 4)))
    b.output(b.prelu(y, np.linspace(-0.5, 0.5, 6).astype(np.float32)))
    # Not an epilogue: with the prelu pass off it stays (tests/test_fusion_prelu.py folds it).
    check_folds(b.build(), runtime, 0, fuse="pad,clamp,epilogue,residual,views,squeeze")
    # x = 0 exactly, and a negative slope: PRELU's x >= 0 and LEAKY_RELU's x > 0 agree there.
    b = ModelBuilder(seed=9)
    y = b.conv2d(b.input("x", (1, 7, 6, 4)), b.rand((6, 3, 3, 4)))
    b.output(b.prelu(y, np.array([-0.25], np.float32)))
    x = np.random.default_rng(0).standard_normal((1, 7, 6, 4)).astype(np.float32)
    x[0, :3] = 0.0  # conv outputs there are its bias, some of them 0 after the rows of zeros
    outs = _one_kernel_and_reference(b.build(), x, runtime)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


# MAXIMUM / MINIMUM of a constant scalar after the epilogue, or alone after the producer
# (PostClamp): Keras' tf.math.maximum after a LEAKY_RELU, PyTorch's clamp as two nodes.
def _clamp(b: ModelBuilder, y: int, op: str, c: float, first: bool = True) -> int:
    f = b.maximum if op == "max" else b.minimum
    return f(y, c) if first else f(np.array(c, np.float32), y)


@pytest.mark.parametrize("producer", ["conv", "depthwise", "fully_connected", "mul_broadcast"])
@pytest.mark.parametrize(
    ("kind", "clamps"),
    [
        ("LEAKY_RELU", [("max", -0.3, True)]),
        ("LEAKY_RELU", [("max", -0.3, False), ("min", 0.5, False)]),
        ("SWISH", [("min", 0.2, True)]),
        (None, [("max", -0.2, True), ("min", 0.4, True)]),
        (None, [("min", 0.1, False)]),
    ],
)
def test_constant_clamps_fold_after_the_epilogue(
    producer: str, kind: str | None, clamps: list[tuple[str, float, bool]], runtime: str
) -> None:
    b = ModelBuilder(seed=15)
    y = PRODUCERS[producer](b, b.input("x", (1, 7, 6, 4)))
    n = 0
    if kind:
        y, n = epilogue(b, kind, y)
    for op, c, first in clamps:
        y = _clamp(b, y, op, c, first)
    b.output(b.mul(y, y))  # the clamps' output is no partition output
    check_folds(b.build(), runtime, folded=n + len(clamps))


def test_at_most_two_clamps_fold_and_a_tensor_operand_never(runtime: str) -> None:
    b = ModelBuilder(seed=16)
    x = b.input("x", (1, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)))
    y = _clamp(b, _clamp(b, _clamp(b, y, "max", -0.5), "min", 0.5), "max", -0.1)
    z = b.conv2d(x, b.rand((4, 3, 3, 4)))
    z = b.maximum(z, b.rand((4,), 0.1))  # a constant, but a vector: no clamp
    b.output(b.add(y, z))
    check_folds(b.build(), runtime, folded=2)


def test_a_clamp_read_elsewhere_ends_the_fold(runtime: str) -> None:
    b = ModelBuilder(seed=17)
    y = b.conv2d(b.input("x", (1, 6, 5, 4)), b.rand((4, 3, 3, 4)))
    m = b.maximum(y, -0.2)
    b.output(b.minimum(m, 0.3))
    b.output(b.mul(m, 2.0))
    # The MAXIMUM's output has two readers: it folds, the MINIMUM after it does not.
    check_folds(b.build(), runtime, folded=1)


@pytest.mark.parametrize("first", [True, False])
def test_folded_clamps_put_nans_where_tflite_does(first: bool, runtime: str) -> None:
    # TFLite's MAXIMUM / MINIMUM compare: max(NaN, c) is c, max(c, NaN) is NaN. The folded
    # clamp keeps the node's operand order.
    b = ModelBuilder(seed=18)
    y = b.conv2d(b.input("x", (1, 5, 5, 2)), b.rand((3, 1, 1, 2)))
    y, _ = epilogue(b, "LEAKY_RELU", y)
    b.output(_clamp(b, _clamp(b, y, "max", -0.25, first), "min", 0.75, first))
    model = b.build()
    x = np.random.default_rng(1).standard_normal((1, 5, 5, 2)).astype(np.float32)
    x[0, 1, 2, 0] = np.nan
    outs = _one_kernel_and_reference(model, x, runtime)
    assert np.isnan(outs[1]).any() == (not first)  # the case reaches the NaN's comparison
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


# A MUL, ADD, SUB or DIV of a constant scalar with no activation, or a NEG, after the producer's
# clamp and epilogue (PostClamp): hard sigmoid as Keras and litert-torch convert it (a conv with
# RELU6 and the + 3 in its bias, then MUL by 1/6), a rescale.
@pytest.mark.parametrize("producer", ["conv", "depthwise", "fully_connected", "mul_broadcast"])
@pytest.mark.parametrize(
    ("kind", "ops"),
    [
        (None, [("mul", 1 / 6, True)]),
        (None, [("mul", -0.5, False), ("add", 0.5, False)]),
        (None, [("sub", 0.25, True), ("div", 3.0, True)]),
        (None, [("neg", 0.0, True), ("add", 0.5, True)]),  # NEG is a MUL by -1
        ("LEAKY_RELU", [("add", -1.0, True), ("max", -0.3, True)]),
    ],
)
def test_constant_arithmetic_folds_after_the_epilogue(
    producer: str, kind: str | None, ops: list[tuple[str, float, bool]], runtime: str
) -> None:
    b = ModelBuilder(seed=19)
    y = PRODUCERS[producer](b, b.input("x", (1, 7, 6, 4)))
    n = 0
    if kind:
        y, n = epilogue(b, kind, y)
    for op, c, first in ops:
        k = np.array(c, np.float32)
        if op in ("max", "min"):
            y = _clamp(b, y, op, c, first)
        elif op == "neg":
            y = b.neg(y)
        else:
            f = getattr(b, op)
            y = f(y, k) if first else f(k, y)
    b.output(b.mul(y, y))
    check_folds(b.build(), runtime, folded=n + len(ops))


def test_arithmetic_that_does_not_fold(runtime: str) -> None:
    # A fused activation, the constant first of a SUB or DIV, a vector constant: each stays a
    # node of its own.
    b = ModelBuilder(seed=20)
    x = b.input("x", (1, 6, 5, 4))
    conv = PRODUCERS["conv"]
    outs = [
        b.mul(conv(b, x), 2.0, "RELU"),
        b.sub(np.array(1.0, np.float32), conv(b, x)),
        b.div(np.array(2.0, np.float32), conv(b, x)),
        b.add(conv(b, x), b.rand((6,), 0.5)),
    ]
    for y in outs:
        b.output(b.mul(y, y))
    check_folds(b.build(), runtime, folded=0)


def test_hard_sigmoid_gate_of_a_squeeze_excite_block(runtime: str) -> None:
    # MobileNetV3's block as Keras writes it: MEAN, conv RELU, conv RELU6, MUL by 1/6, the gate's
    # MUL of the block's input, a projection. The MUL by 1/6 runs in the dense op's kernel (and
    # the gate's in the projection's, fusion/gate.cc: no MUL launches).
    b = ModelBuilder(seed=21)
    x = b.input("x", (1, 8, 8, 24))
    m = b.mean(x, [1, 2], keep_dims=True)
    s = b.conv2d(m, b.rand((8, 1, 1, 24)), b.rand((8,), 0.2), activation="RELU")
    s = b.conv2d(s, b.rand((24, 1, 1, 8)), b.rand((24,), 1.0) + 3.0, activation="RELU6")
    s = b.mul(s, np.array(1 / 6, np.float32))
    b.output(b.conv2d(b.mul(x, s), b.rand((16, 1, 1, 24)), b.rand((16,), 0.2)))
    common: dict[str, Any] = {"expect_delegated": "all", "profiling": True}
    on = check_parity(b.build(), runtime, **common)
    off = check_parity(b.build(), runtime, fuse=NO_EPILOGUE, **common)
    assert _launches(on) == _launches(off) - 1, on.delegate.profile().table()
    assert not _muls(on), on.delegate.profile().table()


NO_EPILOGUE = "affine,pad,clamp,residual,views,squeeze,gate,depthwise,prelu,expand"  # not epilogue


def _muls(r: ParityResult) -> list[Any]:
    return [k for k in r.delegate.profile().kernels if k.op == "MUL"]
