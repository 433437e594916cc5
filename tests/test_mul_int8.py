"""MUL on int8 / uint8 tensors against TFLite's integer kernels, bit for bit: same shapes (sizes
around LiteRT's 16-element NEON loop), broadcasting, constant operands, fused activations,
power-of-two scales (every final shift a tie), and the scales LiteRT's NEON loop would
saturate in int16 (left on the CPU there)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from int8_parity import check_int8_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

CASES = [
    # a shape, b shape (None: a constant of a's last dim), activation, b's scale factor
    ((1, 7, 9, 5), (1, 7, 9, 5), None, 1.0),
    ((1, 8, 8, 16), (1, 8, 8, 16), "RELU6", 0.05),
    ((2, 3, 37), (2, 3, 37), "RELU", 3.0),
    ((1, 6, 6, 12), (1, 1, 1, 12), None, 1.0),
    ((1, 5, 7, 3), (7, 1), "RELU_N1_TO_1", 0.3),
    ((4, 33), (1,), None, 1.0),
    ((1, 10, 10, 8), None, None, 2.0),
    ((3, 1, 5), (1, 4, 1), None, 1.0),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("pow2", [False, True])
def test_mul_int8(runtime: str, case, pow2: bool) -> None:
    a_shape, b_shape, act, factor = case
    b = ModelBuilder(seed=len(a_shape) * 7 + a_shape[-1])
    x = b.input("a", a_shape)
    y = b.rand((a_shape[-1],), factor) if b_shape is None else b.input("b", b_shape)
    b.output(b.mul(x, y, activation=act))
    rng = np.random.default_rng(a_shape[-1])
    shapes = [a_shape] + ([] if b_shape is None else [b_shape])
    samples = [
        [
            rng.standard_normal(s).astype(np.float32) * (factor if i else 1)
            for i, s in enumerate(shapes)
        ]
        for _ in range(3)
    ]
    model = quantize_model(
        b.build(), samples, io="int8", jitter=0.3, seed=a_shape[-1], pow2_scales=pow2
    )
    check_int8_parity(model, runtime, min_fraction=1.0)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mul_int8_explicit(runtime: str, dtype: str) -> None:
    zp = (3, -7, 5) if dtype == "int8" else (131, 120, 128)
    b = ModelBuilder()
    x = b.quant_input("a", (1, 9, 9, 35), 0.05, zp[0], dtype)
    y = b.quant_input("b", (1, 1, 9, 35), 0.125, zp[1], dtype)
    z = b._op(18, [x, y], [(1, 9, 9, 35)], options="MulOptions", out_dtype=np.dtype(dtype))[0]
    b.set_quant(z, 0.25, zp[2])
    b.output(z)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


def test_mul_int8_int16_saturation_stays_on_litert_cpu() -> None:
    # Products that reach beyond int16 after rescaling: LiteRT's NEON loop saturates them where
    # its scalar code does not, so the delegate leaves the node to it; tflite_runtime's scalar
    # kernel is matched.
    b = ModelBuilder()
    x = b.quant_input("a", (1, 40), 1.0, 0)
    y = b.quant_input("b", (1, 40), 1.0, 0)
    z = b._op(18, [x, y], [(1, 40)], options="MulOptions", out_dtype=np.int8)[0]
    b.set_quant(z, 1.0 / 64, 0)
    b.output(z)
    model = b.build()
    if importlib.util.find_spec("tflite_runtime") is not None:  # absent on Python 3.12+
        check_int8_parity(model, "tflite_runtime", min_fraction=1.0)
    d = clgpu_delegate.load()
    make_interpreter(model, [d], runtime="ai_edge_litert", reference=True)
    (dec,) = d.decisions()
    assert not dec["delegated"] and "int16" in dec["reason"]
