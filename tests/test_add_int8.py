"""ADD and SUB on int8 tensors against TFLite's integer kernels, bit for bit: same shapes (sizes
around the 8-element NEON loop LiteRT's kernel rounds with), broadcasting, constant operands,
fused activations, operands of very different scales."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # a shape, b shape (None: a constant of a's last dim), op, activation, b's scale factor
    ((1, 7, 9, 5), (1, 7, 9, 5), "add", None, 1.0),
    ((1, 8, 8, 16), (1, 8, 8, 16), "add", "RELU6", 0.05),
    ((2, 3, 37), (2, 3, 37), "sub", "RELU", 3.0),
    ((1, 6, 6, 12), (1, 1, 1, 12), "add", None, 1.0),
    ((1, 5, 7, 3), (7, 1), "sub", None, 0.3),
    ((4, 33), (1,), "add", "RELU_N1_TO_1", 1.0),
    ((1, 10, 10, 8), None, "add", None, 2.0),
    ((1, 4, 4, 4), None, "sub", "RELU", 0.01),
    ((3, 1, 5), (1, 4, 1), "sub", None, 1.0),
]


@pytest.mark.parametrize("case", CASES)
def test_add_int8(runtime: str, case) -> None:
    a_shape, b_shape, op, act, factor = case
    b = ModelBuilder(seed=len(a_shape) * 7 + a_shape[-1])
    x = b.input("a", a_shape)
    y = b.rand((a_shape[-1],), factor) if b_shape is None else b.input("b", b_shape)
    b.output((b.sub if op == "sub" else b.add)(x, y, activation=act))
    # Calibrated on b scaled by `factor`: the operands' scales differ.
    rng = np.random.default_rng(a_shape[-1])
    shapes = [a_shape] + ([] if b_shape is None else [b_shape])
    samples = [
        [
            rng.standard_normal(s).astype(np.float32) * (factor if i else 1)
            for i, s in enumerate(shapes)
        ]
        for _ in range(3)
    ]
    model = quantize_model(b.build(), samples, io="int8", jitter=0.3, seed=a_shape[-1])
    check_int8_parity(model, runtime)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("b_shape", [(1, 16, 16, 35), (1, 1, 1, 35), (16, 1, 1)])
def test_add_int8_ties(runtime: str, op: str, b_shape) -> None:
    # Power-of-two scale ratios: many exact ties in the multipliers' final shifts, where the
    # CPU kernels' roundings show.
    b = ModelBuilder()
    x = b.quant_input("a", (1, 16, 16, 35), 0.05, 3)
    y = b.quant_input("b", b_shape, 0.025, -7)
    z = (b.sub if op == "sub" else b.add)(x, y)
    b.set_quant(z, 0.1, 5)
    b.output(z)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)
