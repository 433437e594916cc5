"""MEAN on int8 / uint8 tensors against TFLite's kernels, bit for bit: its 4-D path over H, W with
keep_dims (float-derived multiplier and bias; LiteRT's NEON channels, split between its threads,
round ties up), its general integer path (any axes, negative and repeated ones), power-of-two
scales (every final shift a tie)."""

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
