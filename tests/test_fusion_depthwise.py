"""A depthwise convolution folded into the 1x1 convolution reading its output (AttachDepthwise,
kernels/gemm_int8.cl's DW_A): the GEMM computes its A, the depthwise's requantized output, from
the depthwise's input where its tiles load it, so a MobileNet block's depthwise and projection run
as one launch. Bit-exact against TFLite's int8 kernels with the fold on and off (option fuse_add):
strides, padding, dilation, 5x5 filters, activations, a residual ADD and a table folded into the
same GEMM, split-K, repeated invokes, inputs at the int8 extremes; and the graphs that must not
fold (the tensor read elsewhere, channels not in fours, a depth multiplier, a depthwise with a
table of its own, a 3x3 convolution after it, the direct algorithm, tensors in chunks, a layer
whose taps the GEMM would compute again for too many tiles of outputs). Float
(kernels/conv2d_implicit_gemm.cl's DW_A) within the fp32 / fp16 tolerances: the same shapes,
channels not in fours (the scalar loads), the 1x1's epilogue, the depthwise's own clamp and
epilogue (HARD_SWISH, swish, a RELU6 node, a post clamp), fp16 storage, split-K."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import launches as _launches
from int8_parity import Int8Result, check_int8_parity, quantized_inputs
from parity import ParityResult, check_parity, compare, precision_tolerances, random_inputs, run

import clgpu_delegate
from clgpu_delegate._native import native
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter


def _folded(r: Int8Result | ParityResult) -> int:
    """Convolutions that ran a depthwise inside (a split float GEMM has two kernels)."""
    return len({k.node for k in r.delegate.profile().kernels if "+DEPTHWISE" in k.algorithm})


def block(
    shape: tuple[int, int, int, int],
    *,
    out: int = 24,
    k: int = 3,
    stride: int = 1,
    dilation: int = 1,
    padding: str = "SAME",
    act: str | None = "RELU6",
    multiplier: int = 1,
    residual: bool = False,
    after: str = "",
    pw_kernel: int = 1,
    pw_stride: int = 1,
    seed: int = 0,
    quantize: bool = True,
) -> bytes:
    """An int8 MobileNetV2 block's tail: x -> 1x1 conv (an activation, not the model's input) ->
    depthwise (act) -> `pw_kernel` conv [+ the 1x1's output: residual] [-> `after`: "logistic",
    "hard_swish"]. quantize=False: the float model."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    cm = c * multiplier
    d = b.depthwise_conv2d(
        h, b.rand((1, k, k, cm)), b.rand((cm,), 0.2), stride, dilation, padding, multiplier, act
    )
    f = b.rand((out, pw_kernel, pw_kernel, cm))
    y = b.conv2d(d, f, b.rand((out,), 0.2), pw_stride, 1, "SAME")
    if residual:
        y = b.add(y, h)
    if after == "logistic":
        y = b.logistic(y)
    elif after == "hard_swish":
        y = b.hard_swish(y)
    b.output(y)
    if not quantize:
        return b.build()
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.3)


def check_fold(model: bytes, runtime: str, folded: int, **options: Any) -> Int8Result:
    """Bit-exact with the fold on and off (fuse_add, which turns the other folds off too), and
    `folded` depthwise convolutions run inside their GEMM: that many launches fewer."""
    common = {"min_fraction": 1.0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    assert _folded(on) == folded, on.delegate.profile().table()
    base = check_int8_parity(model, runtime, **common, fuse_add=False)
    assert _folded(base) == 0
    if folded:
        # Without the fold, only the other folds (a residual ADD, a table) change the count.
        unfolded = check_int8_parity(model, runtime, **common, conv_algorithm="implicit_gemm")
        assert _folded(unfolded) == 0
        # An expand folded in as well (tests/test_fusion_expand.py) is one launch fewer too.
        expanded = len({k.node for k in on.delegate.profile().kernels if "+EXPAND" in k.algorithm})
        assert _launches(on) == _launches(unfolded) - folded - expanded, (
            on.delegate.profile().table()
        )
    return on


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 16, 16, 32), {}),
        ((1, 15, 13, 24), {"stride": 2}),  # odd sizes, stride 2 (SAME pads one side)
        ((1, 12, 12, 8), {"padding": "VALID", "dilation": 2}),
        ((1, 11, 9, 16), {"k": 5, "act": None}),  # EfficientNet's 5x5, no activation
        ((1, 5, 5, 32), {"out": 128, "act": "RELU"}),  # several column tiles recompute A
        ((2, 6, 6, 12), {"out": 7}),  # two images, an odd output width
    ],
)
def test_depthwise_runs_inside_the_pointwise_gemm(
    runtime: str, shape: tuple[int, int, int, int], kw: dict[str, Any]
) -> None:
    check_fold(block(shape, seed=shape[3], **kw), runtime, 1)


def test_with_a_residual_add_and_a_table(runtime: str) -> None:
    # MobileNetV2's residual blocks: the ADD folds into the same GEMM as the depthwise.
    r = check_fold(block((1, 9, 9, 32), out=32, residual=True, seed=3), runtime, 1)
    assert any(k.algorithm.endswith("+DEPTHWISE+ADD") for k in r.delegate.profile().kernels)
    # A LOGISTIC after the projection: a table applied to the GEMM's integers.
    check_fold(block((1, 8, 8, 16), after="logistic", seed=4), runtime, 1)


def test_split_k(runtime: str) -> None:
    # Each split of K computes its own channels of the depthwise.
    check_fold(block((1, 4, 4, 96), out=16, seed=5), runtime, 1, gemm_splits=3)


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 8, 8, 16), {}),
        ((1, 11, 9, 16), {"k": 5, "act": None}),
        ((1, 15, 13, 24), {"stride": 2}),
        ((1, 12, 12, 8), {"padding": "VALID", "dilation": 2}),
    ],
)
def test_short_k_loads_the_taps_together(
    runtime: str, shape: tuple[int, int, int, int], kw: dict[str, Any], monkeypatch: Any
) -> None:
    # A layer whose tiles cannot fill the device even with K split to single steps (batch-1
    # layers of small models) reads the depthwise's taps through clamped addresses, not branches
    # (kernels/gemm_int8.cl's DW_TAPS_TOGETHER): 64 x 64 tiles make every layer here one group
    # of a short K on this machine's device.
    monkeypatch.setenv("CLGPU_TUNE_GEMM_INT8", "64,64,4,4,4")
    check_fold(block(shape, seed=20 + shape[3], **kw), runtime, 1)


def test_repeated_invokes_and_extreme_inputs(runtime: str) -> None:
    m = block((1, 10, 10, 16), residual=True, out=16, seed=6)
    ref = quantized_inputs([{"shape": (1, 10, 10, 16), "dtype": np.int8}])[0]
    for v in (np.full_like(ref, 127), np.full_like(ref, -128), ref):
        r = check_int8_parity(m, runtime, inputs=[v], min_fraction=1.0, profiling=True)
        assert _folded(r) == 1
    for seed in (1, 2):
        r = check_int8_parity(m, runtime, seed=seed, min_fraction=1.0)
        assert r.stats.exact == r.stats.elements


def test_depthwise_read_elsewhere_does_not_fold(runtime: str) -> None:
    # The depthwise's output is also a model output: it must be written.
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 8, 8, 16))
    d = b.depthwise_conv2d(x, b.rand((1, 3, 3, 16)), b.rand((16,), 0.2), 1, 1, "SAME", 1, "RELU6")
    b.output(d)
    b.output(b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME"))
    check_fold(quantize_model(b.build(), io="int8", seed=7), runtime, 0)
    # Read by two convolutions.
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 8, 8, 16))
    d = b.depthwise_conv2d(x, b.rand((1, 3, 3, 16)), b.rand((16,), 0.2), 1, 1, "SAME", 1, None)
    y1 = b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME")
    y2 = b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME")
    b.output(b.add(y1, y2))
    check_fold(quantize_model(b.build(), io="int8", seed=8), runtime, 0)


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 8, 8, 6), {}),  # channels not in fours
        ((1, 8, 8, 8), {"multiplier": 2}),  # a depth multiplier
        ((1, 8, 8, 16), {"act": None, "pw_kernel": 3}),  # a 3x3 convolution reads it
        ((1, 8, 7, 8), {"pw_stride": 2}),  # a 1x1 of stride 2 reads every other pixel
    ],
)
def test_other_shapes_do_not_fold(
    runtime: str, shape: tuple[int, int, int, int], kw: dict[str, Any]
) -> None:
    check_fold(block(shape, seed=9, **kw), runtime, 0)


def test_depthwise_with_its_own_table_does_not_fold(runtime: str) -> None:
    # MobileNetV3: a HARD_SWISH after the depthwise folds into it as a table, which the GEMM's A
    # does not apply.
    b = ModelBuilder(seed=10)
    x = b.input("x", (1, 8, 8, 16))
    d = b.depthwise_conv2d(x, b.rand((1, 3, 3, 16)), b.rand((16,), 0.2), 1, 1, "SAME", 1, None)
    b.output(b.conv2d(b.hard_swish(d), b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME"))
    check_fold(quantize_model(b.build(), io="int8", seed=10), runtime, 0)


def test_direct_algorithm_and_chunks_do_not_fold(runtime: str) -> None:
    check_fold(block((1, 12, 12, 16), seed=11), runtime, 0, conv_algorithm="direct")
    # The projection's output (8 * 8 * 64 bytes) is over the 1 KiB limit, the depthwise's tensors
    # (8 * 8 * 16) are not: the projection runs in chunks, the depthwise apart.
    check_fold(block((1, 8, 8, 16), out=64, seed=12), runtime, 0, max_alloc_bytes=1024)


# Float: the implicit GEMM's DW_A (kernels/conv2d_implicit_gemm.cl), within fp32 / fp16 tolerances.
def float_block(shape: tuple[int, int, int, int], **kw: Any) -> bytes:
    return block(shape, quantize=False, **kw)


def check_float_fold(
    model: bytes, runtime: str, folded: int, precision: str = "fp32", **options: Any
) -> ParityResult:
    common = {"profiling": True, "precision": precision, **precision_tolerances(precision)}
    common.update(options)
    on = check_parity(model, runtime, expect_delegated="all", **common)
    assert _folded(on) == folded, on.delegate.profile().table()
    off = check_parity(model, runtime, expect_delegated="all", fuse_add=False, **common)
    assert _folded(off) == 0
    if folded:
        forced = check_parity(
            model, runtime, expect_delegated="all", conv_algorithm="direct", **common
        )
        assert _folded(forced) == 0
    return on


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 16, 16, 32), {}),
        ((1, 15, 13, 24), {"stride": 2}),
        ((1, 12, 12, 6), {"padding": "VALID", "dilation": 2}),  # channels not in fours
        ((1, 11, 9, 16), {"k": 5, "act": None}),
        ((1, 5, 5, 32), {"out": 128, "act": "RELU"}),
        ((2, 6, 6, 12), {"out": 7, "residual": False}),
        ((1, 9, 9, 32), {"out": 32, "residual": True}),
        ((1, 8, 8, 16), {"after": "hard_swish"}),  # the 1x1's own epilogue
    ],
)
def test_float_depthwise_runs_inside_the_pointwise_gemm(
    runtime: str, shape: tuple[int, int, int, int], kw: dict[str, Any]
) -> None:
    check_float_fold(float_block(shape, seed=shape[3], **kw), runtime, 1)


@pytest.mark.parametrize("quantize", [True, False], ids=["int8", "float"])
def test_a_layer_too_large_to_compute_again_stays_apart(runtime: str, quantize: bool) -> None:
    # Ten tiles of 32 outputs would compute 7 x 7 x 160 x 9 taps ten times over, more than a
    # launch costs this machine's device (DepthwiseFoldPays): the depthwise keeps its kernel.
    model = block((1, 7, 7, 160), out=320, act="RELU", seed=30, quantize=quantize)
    r = check_fold(model, runtime, 0) if quantize else check_float_fold(model, runtime, 0)
    assert any(k.op == "DEPTHWISE_CONV_2D" for k in r.delegate.profile().kernels)


def test_float_fp16_and_split_k(runtime: str) -> None:
    check_float_fold(
        float_block((1, 10, 10, 24), residual=True, out=24, seed=13), runtime, 1, precision="fp16"
    )
    check_float_fold(float_block((1, 4, 4, 96), out=16, seed=14), runtime, 1, gemm_splits=3)


def _dw_then(after: str, seed: int, shape: tuple[int, int, int, int] = (1, 8, 8, 16)) -> bytes:
    """A float depthwise (no fused activation) -> `after` -> 1x1 conv: MobileNetV3's blocks."""
    b = ModelBuilder(seed=seed)
    c = shape[3]
    x = b.input("x", shape)
    d = b.depthwise_conv2d(x, b.rand((1, 3, 3, c)), b.rand((c,), 0.2), 1, 1, "SAME", 1, None)
    if after == "hard_swish":
        d = b.hard_swish(d)
    elif after == "swish":
        d = b.mul(d, b.logistic(d))
    elif after == "relu6":  # a RELU6 node: the clamp pass
        d = b.relu6(d)
    elif after == "hard_swish_min":  # an epilogue and a post clamp
        d = b.minimum(b.hard_swish(d), np.array(0.5, np.float32))
    b.output(b.conv2d(d, b.rand((8, 1, 1, c)), b.rand((8,), 0.2), 1, 1, "SAME"))
    return b.build()


@pytest.mark.parametrize("after", ["hard_swish", "swish", "relu6", "hard_swish_min"])
def test_float_depthwise_with_its_epilogue_folds(runtime: str, after: str) -> None:
    # MobileNetV3: a HARD_SWISH folded into the depthwise's own kernel goes with it into the
    # GEMM, which applies it where it computes A: one kernel for depthwise, HARD_SWISH and 1x1.
    model = _dw_then(after, seed=15)
    on = check_float_fold(model, runtime, 1)
    assert _launches(on) == 1, on.delegate.profile().table()
    no_dw = "pad,clamp,epilogue,residual,views,squeeze,expand"  # every pass but depthwise
    apart = check_parity(model, runtime, expect_delegated="all", profiling=True, fuse=no_dw)
    assert _folded(apart) == 0 and _launches(apart) == 2, apart.delegate.profile().table()


def test_float_depthwise_epilogue_fp16_and_split_k(runtime: str) -> None:
    check_float_fold(_dw_then("hard_swish", 16, (1, 6, 6, 24)), runtime, 1, precision="fp16")
    check_float_fold(_dw_then("swish", 17, (1, 4, 4, 96)), runtime, 1, gemm_splits=3)


@pytest.mark.parametrize(
    "kw,options",
    [
        ({"out": 64}, {}),
        ({"out": 64, "residual": True}, {"gemm_splits": 2}),
        ({"out": 96, "act": "RELU"}, {"gemm_splits": 3}),
    ],
)
def test_float_fold_in_the_small_map_tiles(
    runtime: str, monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], options: dict[str, Any]
) -> None:
    # igemm_dw_small (PlanDepthwiseGemm), the H200's 64 x 64 rows, where the big tiles, given
    # the H200's 128 x 64, make one group of this 9 x 9 map: fewer than this device's units. With
    # the split's one-launch form offered, which its partition measures against the other.
    assert native.select_device().compute_units >= 2
    monkeypatch.setenv("CLGPU_TUNE_IGEMM_BIG", "128,64,16,8,4")
    monkeypatch.setenv("CLGPU_TUNE_IGEMM_DW_SMALL", "64,64,16,4,4")
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "4")
    facts = {"vendor": "x", "name": "y", "type": "cpu", "compute_units": 2}
    assert native._device_profile(facts, dw_gemms=[(9, 9, 64, 64)])["dw_gemm_tiles"] == [(64, 64)]
    check_float_fold(float_block((1, 9, 9, 64), seed=kw["out"], **kw), runtime, 1, **options)


def test_float_depthwise_multiplier_does_not_fold(runtime: str) -> None:
    check_float_fold(float_block((1, 8, 8, 8), multiplier=2, seed=16), runtime, 0)
    # Nor into a 1x1 of stride 2, which reads every other pixel.
    check_float_fold(float_block((1, 8, 7, 8), pw_stride=2, seed=18), runtime, 0)


@pytest.mark.parametrize("quantize", [True, False])
def test_each_plan_folds_anew_after_a_resize(runtime: str, quantize: bool) -> None:
    # Batch 1, then 3 (the GEMM's rows span three images), then 1 again on the same
    # interpreters: every plan unfolds and folds again, every output checked against the CPU.
    model = block((1, 9, 7, 16), residual=True, out=16, seed=17, quantize=quantize)
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    for batch in (1, 3, 1):
        for interp in (it, ref):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 9, 7, 16))
            interp.allocate_tensors()
        d.reset_profile()
        details = ref.get_input_details()
        inputs = quantized_inputs(details, batch) if quantize else random_inputs(details, batch)
        got, want = run(it, inputs), run(ref, inputs)
        if quantize:
            np.testing.assert_array_equal(got[0], want[0], err_msg=f"batch {batch}")
        else:
            compare(got, want, 1e-4, None, f" (batch {batch})")
        assert _folded_profile(d) == 1, d.profile().table()


def _folded_profile(d: Any) -> int:
    return len({k.node for k in d.profile().kernels if "+DEPTHWISE" in k.algorithm})


def _relu6_block_folded_and_apart(
    runtime: str, seed: int, x: np.ndarray
) -> tuple[bytes, list[np.ndarray]]:
    """A 3x3 depthwise (RELU6) into a 1x1 on `x` [1, 8, 8, 16]: the model, and its outputs
    with the depthwise folded into the GEMM and with it apart (fuse_add off)."""
    b = ModelBuilder(seed=seed)
    x_in = b.input("x", (1, 8, 8, 16))
    d = b.depthwise_conv2d(
        x_in, b.rand((1, 3, 3, 16)), b.rand((16,), 0.2), 1, 1, "SAME", 1, "RELU6"
    )
    b.output(b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,), 0.2), 1, 1, "SAME"))
    model = b.build()
    outs, delegates = [], []
    for options in ({}, {"fuse_add": False}):
        delegates.append(clgpu_delegate.load(partitioning="all", profiling=True, **options))
        interp = make_interpreter(model, delegates[-1:], runtime=runtime, reference=True)
        interp.allocate_tensors()
        outs.append(run(interp, [x])[0])
    assert _folded_profile(delegates[0]) == 1 and _folded_profile(delegates[1]) == 0
    return model, outs


def _cpu(model: bytes, runtime: str, x: np.ndarray) -> np.ndarray:
    cpu = make_interpreter(model, None, runtime=runtime, reference=True)
    cpu.allocate_tensors()
    return run(cpu, [x])[0]


def test_float_nans_as_the_depthwise_kernel_leaves_them(runtime: str) -> None:
    # A NaN through the depthwise's RELU6: its own kernel keeps it (its clamp compares, as
    # LiteRT's CPU kernel does), and so does the fold, NaN for NaN.
    x = np.random.default_rng(2).standard_normal((1, 8, 8, 16)).astype(np.float32)
    x[0, 3, 3, 0] = np.nan
    model, outs = _relu6_block_folded_and_apart(runtime, 18, x)
    assert np.isnan(outs[1]).any()
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    if runtime == "ai_edge_litert":
        np.testing.assert_allclose(outs[0], _cpu(model, runtime, x), rtol=1e-4, atol=1e-5)


def test_float_infinities_at_the_border_reach_only_their_own_windows(runtime: str) -> None:
    # The fold loads a padding tap from the nearest pixel inside the image and adds nothing for
    # it: an infinite border pixel must not turn the padding taps that land on it into NaN (0 x
    # inf), and reaches exactly the outputs whose windows hold it, as on the CPU.
    x = np.random.default_rng(3).standard_normal((1, 8, 8, 16)).astype(np.float32)
    for h, w, c, v in ((0, 3, 0, np.inf), (4, 7, 1, -np.inf), (7, 0, 2, np.inf), (0, 0, 3, np.inf)):
        x[0, h, w, c] = v  # on the border, one per channel: no window holds two
    model, outs = _relu6_block_folded_and_apart(runtime, 19, x)
    want = _cpu(model, runtime, x)
    assert np.isfinite(want).all()  # RELU6 clamps each window's one infinite tap
    np.testing.assert_allclose(outs[1], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-5)
