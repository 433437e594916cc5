"""PRELU on int8 / uint8 tensors against TFLite's integer kernel, bit for bit: a slope per
channel and one for all, a slope per pixel, the conv before it, power-of-two scales (every
final shift a tie), uint8, and slopes quantized per channel (left on the CPU: its Prepare reads
one scale). XNNPACK takes no int8 PRELU: TFLite's own kernel runs it on one thread, so the cost
model counts it at 10 ns an element (bench/results/cpu-channel-ops-h200-host-*.md)."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

CASES = [
    # input shape, slope shape, a 1x1 conv before it
    ((1, 9, 7, 16), (1, 1, 16), False),
    ((1, 8, 8, 5), (1, 1, 1), False),
    ((1, 6, 5, 3), (6, 5, 3), False),
    ((2, 12, 12, 24), (24,), True),
    ((1, 33), (33,), False),
]


def _prelu_model(shape: tuple[int, ...], slopes: tuple[int, ...], conv: bool, seed: int):
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    if conv:
        c = shape[-1]
        x = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.1), 1, 1, "SAME")
    # Slopes of both signs and above one, as trained PReLUs have them.
    alpha = (np.random.default_rng(seed).standard_normal(slopes) * 0.6).astype(np.float32)
    b.output(b.prelu(x, alpha))
    return b.build()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("pow2", [False, True])
def test_prelu_int8(runtime: str, case, pow2: bool) -> None:
    shape, slopes, conv = case
    seed = len(shape) * 7 + shape[-1]
    rng = np.random.default_rng(seed)
    samples = [[rng.standard_normal(shape).astype(np.float32)] for _ in range(3)]
    model = quantize_model(
        _prelu_model(shape, slopes, conv, seed),
        samples,
        io="int8",
        jitter=0.3,
        seed=seed,
        pow2_scales=pow2,
    )
    r = check_int8_parity(model, runtime, min_fraction=1.0)
    assert {d["op_name"] for d in r.decisions} >= {"PRELU"}, r.decisions


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_prelu_int8_explicit(runtime: str, dtype: str) -> None:
    zp = (3, -7, 5) if dtype == "int8" else (131, 120, 128)
    b = ModelBuilder()
    x = b.quant_input("x", (1, 9, 9, 35), 0.05, zp[0], dtype)
    a = b.quant_input("a", (1, 1, 35), 0.125, zp[1], dtype)
    y = b._op(54, [x, a], [(1, 9, 9, 35)], out_dtype=np.dtype(dtype))[0]
    b.set_quant(y, 0.03, zp[2])
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


def test_prelu_int8_slopes_per_channel_stay_on_the_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (1, 4, 4, 3), 0.05, 0)
    a = b.const(np.array([[[10, 20, -30]]], np.int8))
    b.set_quant(a, [0.1, 0.2, 0.3], [0, 0, 0], axis=2)
    y = b._op(54, [x, a], [(1, 4, 4, 3)], out_dtype=np.dtype(np.int8))[0]
    b.set_quant(y, 0.05, 0)
    b.output(y)
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(b.build(), [d], runtime=runtime, reference=True).allocate_tensors()
    (why,) = [x.reason for x in d.decisions() if x.op_name == "PRELU"]
    assert why.endswith("is quantized per channel"), d.decisions()
