"""A squeeze (ops/squeeze.h): the MEAN over one image's H and W and the one or two dense ops after
it on that vector (a squeeze-and-excitation block's pool, reduce and expand, with their folded
activations) run as one launch (kernels/squeeze_int8.cl, squeeze_float.cl). int8: bit-exact
against TFLite's int8 kernels with the fold on and off (option fuse_add): 1x1 CONV_2Ds through a
RESHAPE or on a keep_dims mean, FULLY_CONNECTEDs, one dense op, odd channel counts (padded
weights), a large image whose mean splits between many groups, power-of-two scales (every shift
a tie), repeated invokes (the kernel leaves its sums and counter zero); and the graphs that must
not fold. Float: the same graphs within fp32 / fp16 tolerances, with each dense op's own clamp
and epilogue (swish, LOGISTIC, HARD_SWISH, LEAKY_RELU, a MAXIMUM with a constant). A
classifier's head: a global AVERAGE_POOL_2D in the MEAN's place and a SOFTMAX after the dense
ops, in the same launch (int8 bit-exact, float within tolerance), and what must not fold."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tflite
from int8_parity import Int8Result, check_int8_parity, quantized_inputs
from parity import ParityResult, check_parity, precision_tolerances

from clgpu_delegate.modelgen import ModelBuilder, quantize_model


def _squeezes(r: Int8Result) -> int:
    """Squeeze launches: the MEAN's own, or one folded into the convolution before it."""
    return sum(
        1
        for k in r.delegate.profile().kernels
        if k.algorithm == "int8_squeeze" or k.algorithm.endswith("+SQUEEZE")
    )


def se_model(
    shape: tuple[int, int, int, int],
    reduced: int,
    *,
    keep_dims: bool = False,
    dense: str = "conv",
    layers: int = 2,
    swish: bool = True,
    pow2: bool = False,
    seed: int = 0,
    quantize: bool = True,
    acts: tuple[str, str] = ("swish", "logistic"),
) -> bytes:
    """An EfficientNet squeeze-excite block: x -> MEAN(H, W) -> [RESHAPE] -> dense (swish) ->
    dense (sigmoid) -> x * that. dense: "conv" (1x1 CONV_2D) or "fc" (FULLY_CONNECTED).
    quantize=False: the float model; `acts` then names each dense op's activation ("swish",
    "logistic", "hard_swish", "leaky", "relu_max": RELU then a MAXIMUM with 0.25, "none")."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    # An activation, not the model's input, as the block's x.
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    m = b.mean(h, [1, 2], keep_dims=keep_dims)
    widths = [reduced, c][:layers]
    for i, n in enumerate(widths):
        k = b.shape(m)[-1]
        if dense == "conv":
            if len(b.shape(m)) != 4:
                m = b.reshape(m, [shape[0], 1, 1, k])
            m = b.conv2d(m, b.rand((n, 1, 1, k)), b.rand((n,), 0.2), 1, 1, "SAME", None)
        else:
            m = b.fully_connected(m, b.rand((n, k)), b.rand((n,), 0.2))
        act = acts[i] if (i == 0 and swish) or (i == 1 and layers == 2) else "none"
        m = _activation(b, m, act)
    if layers == 2:
        s = m
        if len(b.shape(s)) != 4:
            s = b.reshape(s, [shape[0], 1, 1, c])
        b.output(b.mul(h, s))
    else:
        b.output(m)
    if not quantize:
        return b.build()
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.3, pow2_scales=pow2)


def _activation(b: ModelBuilder, m: int, act: str) -> int:
    if act == "swish":
        return b.mul(m, b.logistic(m))
    if act == "logistic":
        return b.logistic(m)
    if act == "hard_swish":
        return b.hard_swish(m)
    if act == "leaky":
        code = tflite.BuiltinOperator.LEAKY_RELU
        return b._op(code, [m], [b.shape(m)], options="LeakyReluOptions", Alpha=0.2)[0]
    if act == "relu_max":
        return b.maximum(b.relu(m), 0.25)
    return m


def _dense_kernels(r: Int8Result) -> int:
    """Kernels of dense ops over a vector (what a squeeze absorbs) that ran on their own."""
    return sum(
        1
        for k in r.delegate.profile().kernels
        if k.op == "FULLY_CONNECTED" or (k.op == "CONV_2D" and k.shape.startswith("[1,1,1,"))
    )


def check_squeeze(model: bytes, runtime: str, folded: int, **options: Any) -> Int8Result:
    """Bit-exact with the fold on and off (fuse_add, which turns the other folds off too);
    `folded` dense ops run inside one squeeze, the others on their own."""
    common = {"min_fraction": 1.0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse_add=False)
    assert _squeezes(off) == 0
    assert _squeezes(on) == (1 if folded else 0), on.delegate.profile().table()
    assert _dense_kernels(on) == _dense_kernels(off) - folded, on.delegate.profile().table()
    return on


@pytest.mark.parametrize(
    "shape,reduced,keep_dims",
    [
        ((1, 14, 14, 32), 8, False),  # Keras: MEAN without keep_dims, RESHAPE to 1x1
        ((1, 7, 7, 96), 4, True),  # TFLite's own: a keep_dims mean straight into the conv
        ((1, 9, 5, 19), 5, False),  # odd channels: both dense ops' K padded to 4
        ((1, 56, 56, 24), 6, True),  # a large image: the mean split between many groups
        ((1, 4, 4, 300), 75, False),  # channels over several groups of 32 columns
    ],
)
def test_squeeze_excite_block_runs_as_one_launch(
    runtime: str, shape: tuple[int, int, int, int], reduced: int, keep_dims: bool
) -> None:
    m = se_model(shape, reduced, keep_dims=keep_dims, seed=shape[3])
    check_squeeze(m, runtime, 2)


@pytest.mark.parametrize("pow2", [False, True])
def test_squeeze_roundings(runtime: str, pow2: bool) -> None:
    # Power-of-two scales make every final shift a tie, where the mean's channels (LiteRT's
    # vector loop) and the GEMM's round differently.
    m = se_model((1, 6, 6, 40), 10, pow2=pow2, seed=11)
    check_squeeze(m, runtime, 2)


def test_fully_connected_dense_ops(runtime: str) -> None:
    m = se_model((1, 8, 8, 24), 6, dense="fc", seed=4)
    check_squeeze(m, runtime, 2)


@pytest.mark.parametrize("dense", ["conv", "fc"])
def test_one_dense_op(runtime: str, dense: str) -> None:
    # A mean and one dense op (a small classifier head) with no activation.
    m = se_model((1, 5, 5, 16), 10, dense=dense, layers=1, swish=False, seed=6)
    check_squeeze(m, runtime, 1)


def test_repeated_invokes_start_from_zero(runtime: str) -> None:
    # The kernel adds the mean's sums into a buffer it keeps and counts its groups: both must be
    # zero again after each launch, or the next invoke's outputs would drift.
    m = se_model((1, 28, 28, 16), 4, seed=8)
    first = check_squeeze(m, runtime, 2)
    for seed in (1, 2, 3):
        r = check_int8_parity(m, runtime, seed=seed, min_fraction=1.0)
        assert r.stats.exact == r.stats.elements
    assert first.stats.exact == first.stats.elements


def test_batch_or_shared_means_do_not_fold(runtime: str) -> None:
    # Two images: the mean is not one vector.
    check_squeeze(se_model((2, 6, 6, 16), 4, seed=2), runtime, 0)
    # The mean read by the dense op and by a model output.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 6, 6, 16))
    m = b.mean(x, [1, 2], keep_dims=True)
    b.output(m)
    b.output(b.conv2d(m, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME", None))
    check_squeeze(quantize_model(b.build(), io="int8", seed=3), runtime, 0)


def test_dense_ops_too_large_for_one_group_do_not_fold(runtime: str) -> None:
    # 600 x 600 int8 weights (352 KiB > 64 KiB): one work-group would run them slower than a GEMM.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 3, 3, 600))
    m = b.mean(x, [1, 2], keep_dims=False)
    b.output(b.fully_connected(m, b.rand((600, 600)), b.rand((600,), 0.2)))
    check_squeeze(quantize_model(b.build(), io="int8", seed=5), runtime, 0)


def test_second_dense_op_too_large_folds_the_first(runtime: str) -> None:
    # 16 -> 32 fits; 32 -> 4096 (128 KiB of weights) does not: one dense op folds.
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 4, 4, 16))
    m = b.mean(x, [1, 2], keep_dims=False)
    m = b.fully_connected(m, b.rand((32, 16)), b.rand((32,), 0.2), "RELU")
    b.output(b.fully_connected(m, b.rand((4096, 32)), b.rand((4096,), 0.2)))
    check_squeeze(quantize_model(b.build(), io="int8", seed=7), runtime, 1)


def test_inputs_over_the_full_range(runtime: str) -> None:
    # Inputs at the int8 extremes (the sums of a large mean near their bound).
    m = se_model((1, 32, 32, 8), 4, seed=9)
    ref = quantized_inputs([{"shape": (1, 32, 32, 8), "dtype": np.int8}])[0]
    for v in (np.full_like(ref, 127), np.full_like(ref, -128), ref):
        r = check_int8_parity(m, runtime, inputs=[v], min_fraction=1.0, profiling=True)
        assert _squeezes(r) == 1


# Float: each dense op keeps its own clamp and epilogue.
def _float_squeezes(r: ParityResult) -> int:
    return sum(1 for k in r.delegate.profile().kernels if k.algorithm == "squeeze")


def check_float_squeeze(
    model: bytes, runtime: str, folded: int, precision: str = "fp32", **options: Any
) -> ParityResult:
    common = {"profiling": True, "precision": precision, **precision_tolerances(precision)}
    common.update(options)
    on = check_parity(model, runtime, expect_delegated="all", **common)
    off = check_parity(model, runtime, expect_delegated="all", fuse_add=False, **common)
    assert _float_squeezes(off) == 0
    assert _float_squeezes(on) == (1 if folded else 0), on.delegate.profile().table()
    assert _dense_kernels(on) == _dense_kernels(off) - folded, on.delegate.profile().table()
    return on


@pytest.mark.parametrize(
    "shape,reduced,keep_dims,dense",
    [
        ((1, 14, 14, 32), 8, False, "conv"),
        ((1, 7, 7, 96), 4, True, "conv"),
        ((1, 9, 5, 19), 5, False, "fc"),
        ((1, 56, 56, 24), 6, True, "conv"),  # the mean split between many groups
    ],
)
def test_float_squeeze_excite_block(
    runtime: str, shape: tuple[int, int, int, int], reduced: int, keep_dims: bool, dense: str
) -> None:
    m = se_model(shape, reduced, keep_dims=keep_dims, dense=dense, quantize=False, seed=shape[3])
    check_float_squeeze(m, runtime, 2)


@pytest.mark.parametrize(
    "acts", [("hard_swish", "logistic"), ("leaky", "relu_max"), ("none", "swish")]
)
def test_float_squeeze_epilogues(runtime: str, acts: tuple[str, str]) -> None:
    # Each dense op's epilogue under its own defines (LEAKY_RELU's alpha, a MAXIMUM's constant).
    m = se_model((1, 6, 6, 40), 10, quantize=False, acts=acts, seed=21)
    check_float_squeeze(m, runtime, 2)


def test_float_squeeze_fp16(runtime: str) -> None:
    m = se_model((1, 12, 12, 48), 12, quantize=False, seed=22)
    check_float_squeeze(m, runtime, 2, precision="fp16")


def test_float_one_dense_op_and_repeated_invokes(runtime: str) -> None:
    m = se_model((1, 20, 20, 16), 10, layers=1, swish=False, quantize=False, seed=23)
    check_float_squeeze(m, runtime, 1)
    for seed in (1, 2):
        check_parity(m, runtime, seed=seed, expect_delegated="all")


def test_float_dense_ops_too_large_do_not_fold(runtime: str) -> None:
    # 600 x 600 float32 weights (1.4 MB) for one work-group to read: the GEMV runs them.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 3, 3, 600))
    m = b.mean(x, [1, 2], keep_dims=False)
    b.output(b.fully_connected(m, b.rand((600, 600)), b.rand((600,), 0.2)))
    check_float_squeeze(b.build(), runtime, 0)


# A classifier's head: MEAN (or a global AVERAGE_POOL_2D) -> dense op(s) -> SOFTMAX, all in the
# squeeze's launch.
def head_model(
    shape: tuple[int, int, int, int],
    widths: tuple[int, ...],
    *,
    beta: float = 1.0,
    pool: str = "",
    quantize: bool = True,
    seed: int = 0,
) -> bytes:
    """x -> 1x1 CONV_2D -> MEAN over H and W, or with `pool` ("VALID" or "SAME") an
    AVERAGE_POOL_2D of one window over the image and a RESHAPE, as the keyword spotters write
    it -> FULLY_CONNECTED per width (RELU between) -> SOFTMAX."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    if pool:
        m = b.reshape(b.avg_pool2d(h, shape[1:3], shape[1:3], pool), (1, c))
    else:
        m = b.mean(h, [1, 2], keep_dims=False)
    for i, n in enumerate(widths):
        m = b.fully_connected(m, b.rand((n, b.shape(m)[-1])), b.rand((n,), 0.2))
        if i + 1 < len(widths):
            m = b.relu(m)
    b.output(b.softmax(m, beta))
    if not quantize:
        return b.build()
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.3)


def _softmax_kernels(r: Any) -> int:
    return sum(1 for k in r.delegate.profile().kernels if k.op == "SOFTMAX")


@pytest.mark.parametrize(
    "shape,widths,beta",
    [
        ((1, 25, 1, 96), (12,), 1.0),  # a keyword spotter's head
        ((1, 7, 7, 64), (32, 10), 0.5),  # two dense ops, beta
        ((1, 3, 3, 40), (256,), 1.0),  # the widest SOFTMAX the squeeze takes
    ],
)
def test_classifier_head_softmax_in_the_squeeze(
    runtime: str, shape: tuple[int, int, int, int], widths: tuple[int, ...], beta: float
) -> None:
    m = head_model(shape, widths, beta=beta, seed=len(widths) + shape[1])
    on = check_squeeze(m, runtime, len(widths))
    assert _softmax_kernels(on) == 0, on.delegate.profile().table()
    f = head_model(shape, widths, beta=beta, quantize=False, seed=len(widths) + shape[1])
    fon = check_float_squeeze(f, runtime, len(widths))
    assert _softmax_kernels(fon) == 0, fon.delegate.profile().table()


def test_softmax_wider_than_the_squeeze_takes_runs_on_its_own(runtime: str) -> None:
    m = head_model((1, 3, 3, 40), (300,), seed=9)
    on = check_squeeze(m, runtime, 1)
    assert _softmax_kernels(on) == 1
    f = head_model((1, 3, 3, 40), (300,), quantize=False, seed=9)
    assert _softmax_kernels(check_float_squeeze(f, runtime, 1)) == 1


@pytest.mark.parametrize(
    "shape,padding",
    [
        ((1, 25, 1, 128), "VALID"),  # kws_mnv2's head (bench/small_models.py)
        ((1, 13, 5, 64), "SAME"),  # DS-CNN's: a window of the image, SAME padding (no pad)
        ((1, 40, 40, 24), "VALID"),  # a large image: the sum split between many groups
    ],
)
def test_global_average_pool_heads_the_squeeze(
    runtime: str, shape: tuple[int, int, int, int], padding: str
) -> None:
    m = head_model(shape, (12,), pool=padding, seed=shape[1])
    on = check_squeeze(m, runtime, 1)
    assert _softmax_kernels(on) == 0
    assert not [
        k
        for k in on.delegate.profile().kernels
        if k.op == "AVERAGE_POOL_2D" and k.algorithm != "int8_squeeze"
    ], on.delegate.profile().table()
    f = head_model(shape, (12,), pool=padding, quantize=False, seed=shape[1])
    fon = check_float_squeeze(f, runtime, 1)
    assert _softmax_kernels(fon) == 0


def test_pool_that_is_not_global_or_clamps_keeps_its_kernel(runtime: str) -> None:
    # A 2x2 window (four outputs), and a global one with a RELU: neither is a squeeze's MEAN.
    for window, act in (((2, 2), None), ((4, 4), "RELU")):
        b = ModelBuilder(seed=3)
        x = b.input("x", (1, 4, 4, 16))
        p = b.avg_pool2d(x, window, window, "VALID", act)
        n = int(np.prod(b.shape(p)))
        y = b.fully_connected(b.reshape(p, (1, n)), b.rand((8, n)), b.rand((8,), 0.2))
        b.output(b.softmax(y))
        r = check_squeeze(quantize_model(b.build(), io="int8", seed=3), runtime, 0)
        assert _softmax_kernels(r) == 1


@pytest.mark.parametrize("head", ["pool", "mean"])
def test_a_pooled_sum_past_flt_max(runtime: str, head: str) -> None:
    # Fifteen values of 3e38 sum to +Inf. TFLite's AVERAGE_POOL_2D bounds its mean at FLT_MAX
    # (its activation range, even without an activation), so FULLY_CONNECTED's products stay
    # finite and the SOFTMAX picks one class; a MEAN keeps the Inf. The squeeze once left a
    # pool's Inf, and three classes tied at the FC's own FLT_MAX bound.
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 5, 3, 4))
    y = b.avg_pool2d(x, (5, 3), 1) if head == "pool" else b.mean(x, (1, 2), keep_dims=True)
    w = np.zeros((4, 4), np.float32)
    w[:, 0] = [0.5, 0.25, -0.5, 0.1]
    y = b.fully_connected(b.reshape(y, (1, 4)), w, np.zeros(4, np.float32))
    b.output(b.softmax(y))
    feed = np.full((1, 5, 3, 4), 0.5, np.float32)
    feed[..., 0] = 3e38
    r = check_parity(b.build(), runtime, inputs=[feed], expect_delegated="all", profiling=True)
    assert [k.algorithm for k in r.delegate.profile().kernels] == ["squeeze"]
    if head == "pool":
        np.testing.assert_array_equal(r.outputs[0], [[1, 0, 0, 0]])
