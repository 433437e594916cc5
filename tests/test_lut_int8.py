"""int8 / uint8 element-wise ops the delegate runs as a table of the input's integers
(lut_int8.cc): LOGISTIC, TANH, ELU (TFLite's float tables), HARD_SWISH (its int16 fixed-point
reference), the RELU family and LEAKY_RELU (requantization and clamp). Every input integer is
fed once, so each case compares the whole table against TFLite's kernels, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tflite
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

B = tflite.BuiltinOperator
OPTIONS = {
    B.HARD_SWISH: ("HardSwishOptions", {}),
    B.LEAKY_RELU: ("LeakyReluOptions", {"Alpha": 0.2}),
}


def _every_integer(dtype: str) -> np.ndarray:
    info = np.iinfo(np.dtype(dtype))
    return np.arange(info.min, int(info.max) + 1).astype(dtype).reshape(1, 16, 16)


def _model(
    code: int, dtype: str, in_q: tuple[float, int], out_q: tuple[float, int], **kw: Any
) -> bytes:
    b = ModelBuilder()
    x = b.quant_input("x", (1, 16, 16), in_q[0], in_q[1], dtype)
    opts, fields = OPTIONS.get(code, (None, {}))
    y = b._op(
        code, [x], [(1, 16, 16)], options=opts, out_dtype=np.dtype(dtype), **{**fields, **kw}
    )[0]
    b.set_quant(y, *out_q)
    b.output(y)
    return b.build()


CASES = [
    # op, dtype, input (scale, zero point), output (scale, zero point)
    (B.LOGISTIC, "int8", (0.05, 3), (1 / 256, -128)),
    (B.LOGISTIC, "int8", (0.25, -100), (1 / 256, -128)),
    (B.LOGISTIC, "uint8", (0.04, 130), (1 / 256, 0)),
    (B.TANH, "int8", (0.03, -7), (1 / 128, 0)),
    (B.TANH, "uint8", (0.1, 128), (1 / 128, 128)),
    (B.ELU, "int8", (0.07, 20), (0.05, -60)),
    (B.HARD_SWISH, "int8", (0.05, -10), (0.04, -90)),
    (B.HARD_SWISH, "int8", (0.5, 0), (0.25, -128)),
    (B.HARD_SWISH, "uint8", (0.02, 100), (0.015, 30)),
    (B.RELU, "int8", (0.05, 4), (0.03, -128)),
    (B.RELU6, "int8", (0.1, -3), (6 / 255, -128)),
    (B.RELU6, "uint8", (0.05, 120), (0.03, 0)),
    (B.RELU_N1_TO_1, "int8", (0.02, 0), (2 / 255, 0)),
    (B.LEAKY_RELU, "int8", (0.05, 10), (0.04, 30)),
    (B.LEAKY_RELU, "uint8", (0.05, 128), (0.05, 100)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2][0]}")
def test_lut_int8(runtime: str, case) -> None:
    code, dtype, in_q, out_q = case
    model = _model(code, dtype, in_q, out_q)
    check_int8_parity(model, runtime, [_every_integer(dtype)], min_fraction=1.0)


def test_relu_0_to_1_int8() -> None:
    # RELU_0_TO_1 exists in LiteRT only.
    model = _model(B.RELU_0_TO_1, "int8", (0.01, -5), (1 / 255, -128))
    check_int8_parity(model, "ai_edge_litert", [_every_integer("int8")], min_fraction=1.0)


def test_logistic_int8_needs_its_output_scale(runtime: str) -> None:
    # TFLite's int8 LOGISTIC demands an output scale of 1/256: anything else stays on the CPU,
    # which refuses it too.
    model = _model(B.LOGISTIC, "int8", (0.05, 3), (1 / 128, -128))
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load()
    make_interpreter(model, [d], runtime=runtime, reference=True)
    (dec,) = d.decisions()
    assert not dec["delegated"] and "1/256" in dec["reason"]


@pytest.mark.parametrize("pow2", [False, True])
def test_lut_int8_quantized_graph(runtime: str, pow2: bool) -> None:
    # Converter-style: each op's parameters from calibration, swish-like chains.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 6, 7, 11))
    y = b.hard_swish(x)
    y = b.mul(y, b.logistic(y))
    b.output(b.concat([b.tanh(y), b.relu6(y)], axis=3))
    model = quantize_model(b.build(), io="float", seed=5, jitter=0.3, pow2_scales=pow2)
    check_int8_parity(model, runtime, min_fraction=1.0, expect_partitions=1)
