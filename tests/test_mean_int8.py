"""MEAN on int8 / uint8 tensors against TFLite's kernels, bit for bit: its 4-D path over H, W with
keep_dims (float-derived multiplier and bias; LiteRT's NEON channels, split between its threads,
round ties up), its general integer path (any axes, negative and repeated ones), power-of-two
scales (every final shift a tie). Reduced axes that are one run between kept ones take the tiled
kernel, whose groups split a large reduced extent and add their sums atomically; others take the
kernel with a group per output."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity, compare_quantized

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

CASES = [
    # shape, axes, keep_dims
    ((2, 6, 5, 40), [1, 2], True),
    ((1, 7, 7, 19), [1, 2], False),
    ((2, 5, 4, 3), [-3, -2], True),
    ((1, 4, 4, 21), [1, 2, 2], True),
    ((3, 4, 37), [1], False),
    ((2, 3, 4, 5), [0, 2], True),
    ((1, 9, 9, 64), [2, 1], True),
    ((5, 17), [0, 1], False),
    ((1, 300, 2), [-2], False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
@pytest.mark.parametrize("pow2", [False, True])
def test_mean_int8(runtime: str, case, pow2: bool) -> None:
    shape, axes, keep = case
    b = ModelBuilder(seed=len(axes))
    x = b.input("x", shape)
    b.output(b.mean(x, axes, keep_dims=keep))
    model = quantize_model(b.build(), io="int8", seed=shape[-1], jitter=0.3, pow2_scales=pow2)
    check_int8_parity(model, runtime, min_fraction=1.0)


def test_mean_uint8(runtime: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (2, 5, 5, 20), 0.125, 130, "uint8")
    for axes, keep in (([1, 2], True), ([3], False)):
        shape = (2, 1, 1, 20) if keep else (2, 5, 5)
        y = b._op(
            40,
            [x, b._int_const(axes, "axes")],
            [shape],
            options="ReducerOptions",
            out_dtype=np.uint8,
            KeepDims=keep,
        )[0]
        b.set_quant(y, 0.0625, 100)
        b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


@pytest.mark.parametrize("threads", [2, 3])
def test_mean_int8_threads(threads: int) -> None:
    # LiteRT's 4-D MEAN gives each thread a range of channels with its own 16-wide NEON loop: the
    # channels that round ties up depend on the interpreter's thread count.
    b = ModelBuilder(seed=1)
    x = b.input("x", (1, 4, 4, 80))
    b.output(b.mean(x, [1, 2], keep_dims=True))
    model = quantize_model(b.build(), io="int8", seed=1, jitter=0.3, pow2_scales=True)
    xs = [
        np.random.default_rng(s).integers(-128, 128, (1, 4, 4, 80)).astype(np.int8)
        for s in range(4)
    ]
    outs = []
    d = clgpu_delegate.load()
    for delegates in (None, [d]):
        i = make_interpreter(
            model, delegates, runtime="ai_edge_litert", reference=True, num_threads=threads
        )
        i.allocate_tensors()
        for v in xs:
            i.set_tensor(i.get_input_details()[0]["index"], v)
            i.invoke()
            outs.append(i.get_tensor(i.get_output_details()[0]["index"]).copy())
    assert all(x["delegated"] for x in d.decisions())
    n = len(xs)
    q = i.get_output_details()[0]["quantization"]
    stats = compare_quantized(outs[n:], outs[:n], [q] * n)
    assert stats.exact == stats.elements, str(stats)


# The tiled kernel on the sizes it is for (EfficientNet's squeeze-excite means) and around them:
# shape, axes, keep_dims, dtype.
TILED = [
    ((1, 112, 112, 32), [1, 2], True, "int8"),  # few channels: 256 groups add up atomically
    ((1, 56, 56, 144), [1, 2], True, "int8"),  # blocks of 32 columns, the last one partial
    ((1, 64, 64, 3), [2, 1], True, "int8"),  # 3 channels
    ((1, 30, 30, 19), [1, 2], True, "uint8"),  # an odd channel count
    ((1, 7, 7, 1152), [1, 2], True, "int8"),  # many channels: a group per block, no split
    ((3, 40, 40, 24), [1, 2], True, "uint8"),  # batch > 1: groups per image
    ((2, 2000, 5), [1], False, "int8"),  # the general arithmetic, split
    ((1, 50, 40, 6), [1, 2], False, "uint8"),  # the general arithmetic (no keep_dims)
    ((6000,), [0], True, "int8"),  # one column
    ((2, 1, 1, 40), [1, 2], True, "int8"),  # nothing to add up
]


def mean_model(shape, axes, keep: bool, dtype: str, in_q, out_q) -> bytes:
    b = ModelBuilder()
    x = b.quant_input("x", shape, in_q[0], in_q[1], dtype)
    kept = [1 if a in axes else n for a, n in enumerate(shape)]
    out_shape = kept if keep else [n for a, n in enumerate(shape) if a not in axes]
    y = b._op(
        40,
        [x, b._int_const(axes, "axes")],
        [tuple(out_shape)],
        options="ReducerOptions",
        out_dtype=np.dtype(dtype),
        KeepDims=keep,
    )[0]
    b.set_quant(y, out_q[0], out_q[1])
    b.output(y)
    return b.build()


def channel_inputs(shape, dtype: str, seed: int) -> np.ndarray:
    # Each channel around its own level, so that the means spread over the output range (uniform
    # inputs average to about the same value everywhere).
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    level = rng.integers(int(info.min) + 30, int(info.max) - 29, shape[-1])
    return np.clip(level + rng.integers(-30, 31, shape), info.min, info.max).astype(dtype)


def kernels_run(r) -> set[str]:
    return {k.kernel for k in r.delegate.profile().kernels}


@pytest.mark.parametrize("case", TILED, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
@pytest.mark.parametrize("pow2", [False, True])
def test_mean_int8_tiled(runtime: str, case, pow2: bool) -> None:
    shape, axes, keep, dtype = case
    zp = 3 if dtype == "int8" else 131
    # Power-of-two scales make every final shift a tie.
    in_q, out_q = ((0.125, zp), (0.25, zp - 7)) if pow2 else ((0.05, zp), (0.04, zp - 7))
    model = mean_model(shape, axes, keep, dtype, in_q, out_q)
    r = check_int8_parity(
        model, runtime, [channel_inputs(shape, dtype, 0)], min_fraction=1.0, profiling=True
    )
    assert kernels_run(r) == {"mean_int8_tiled"}
    # Mostly not saturated: the test sees the sums.
    info = np.iinfo(dtype)
    assert ((r.outputs[0] > info.min) & (r.outputs[0] < info.max)).mean() > 0.5


def test_mean_int8_general_kernel(runtime: str) -> None:
    # Reduced axes with a kept one between them: the group-per-output kernel.
    shape = (2, 30, 4, 50)
    model = mean_model(shape, [0, 2], True, "int8", (0.05, 3), (0.04, -4))
    r = check_int8_parity(
        model, runtime, [channel_inputs(shape, "int8", 1)], min_fraction=1.0, profiling=True
    )
    assert kernels_run(r) == {"mean_int8"}


@pytest.mark.parametrize("shape,axes", [((1, 112, 112, 32), [1, 2]), ((2, 2000, 5), [1])])
def test_mean_int8_tiled_invokes_again(runtime: str, shape, axes) -> None:
    # The last group of each column block leaves the sums and its counter zero for the next
    # launch: invokes after the first are as exact as the first.
    model = mean_model(shape, axes, True, "int8", (0.05, 3), (0.04, -4))
    xs = [channel_inputs(shape, "int8", s) for s in range(3)]
    outs = []
    for delegates in (None, [clgpu_delegate.load()]):
        i = make_interpreter(model, delegates, runtime=runtime, reference=True)
        i.allocate_tensors()
        for v in xs:
            i.set_tensor(i.get_input_details()[0]["index"], v)
            i.invoke()
            outs.append(i.get_tensor(i.get_output_details()[0]["index"]).copy())
    n = len(xs)
    q = i.get_output_details()[0]["quantization"]
    stats = compare_quantized(outs[n:], outs[:n], [q] * n)
    assert stats.exact == stats.elements, str(stats)
