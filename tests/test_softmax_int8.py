"""SOFTMAX on int8 / uint8 tensors against TFLite's kernel, bit for bit: its float table of exp,
the row sum added in order, a correctly rounded reciprocal and the final rounding; rows from 1
to 5000 long (one work-group per row, its table values gathered 1024 at a time for the in-order
sum), several betas and input scales."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # shape, input scale, zero point, beta, dtype
    ((1, 10), 0.1, 0, 1.0, "int8"),
    ((3, 1001), 0.05, -20, 1.0, "int8"),
    ((2, 4, 5, 7), 0.2, 10, 0.5, "int8"),
    ((5, 1), 0.1, 0, 1.0, "int8"),
    ((4, 64), 0.03125, -128, 2.3, "int8"),
    ((2, 3, 100), 0.08, 128, 1.0, "uint8"),
    ((1, 1000), 0.1, 0, 1.0, "int8"),  # a classifier's row: one chunk
    ((2, 1024), 0.06, 3, 1.0, "int8"),  # exactly one chunk
    ((2, 1025), 0.06, 3, 1.0, "uint8"),  # one element into a second chunk
    ((1, 5000), 0.05, -10, 1.0, "int8"),  # five chunks
    ((3, 2500), 0.07, 5, 0.8, "uint8"),  # several rows of several chunks
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}")
def test_softmax_int8(runtime: str, case) -> None:
    shape, scale, zp, beta, dtype = case
    b = ModelBuilder()
    x = b.quant_input("x", shape, scale, zp, dtype)
    y = b._op(25, [x], [shape], options="SoftmaxOptions", out_dtype=np.dtype(dtype), Beta=beta)[0]
    b.set_quant(y, 1 / 256, -128 if dtype == "int8" else 0)
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


@pytest.mark.parametrize("pow2", [False, True])
def test_softmax_int8_classifier_head(runtime: str, pow2: bool) -> None:
    b = ModelBuilder(seed=2)
    x = b.input("x", (2, 3, 3, 16))
    y = b.reshape(b.avg_pool2d(x, 3, 1, "VALID"), (2, 16))
    y = b.fully_connected(y, b.rand((37, 16), 1.0), b.rand((37,), 0.5))
    b.output(b.softmax(y))
    model = quantize_model(b.build(), io="float", seed=2, jitter=0.2, pow2_scales=pow2)
    check_int8_parity(model, runtime, min_fraction=1.0, expect_partitions=1)
