"""QUANTIZE and DEQUANTIZE at a quantized model's float boundary, and requantization between
quantized types: bit-exact against each runtime's CPU kernels, whose roundings differ."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder


def _ties(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Floats at and next to the rounding boundaries (k + 0.5) * scale, and ordinary ones."""
    k = rng.integers(-300, 300, size=shape).astype(np.float64)
    x = ((k + 0.5) * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[1::4] = np.nextafter(flat[1::4], np.float32(np.inf))
    flat[2::4] = (rng.standard_normal(flat[2::4].shape) * 60 * scale).astype(np.float32)
    return x


QUANTIZE_CASES = [
    # shape, scale, zero point, type
    ((1, 37), 0.05, -3, "int8"),
    ((2, 5, 7, 3), 0.0123, 17, "int8"),
    ((1, 8), 1.7, -128, "int8"),
    ((3, 33), 0.004, 100, "uint8"),
    ((1, 1), 0.5, 0, "int8"),
]


@pytest.mark.parametrize("shape,scale,zp,dtype", QUANTIZE_CASES)
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_quantize_float(runtime: str, shape, scale, zp, dtype, precision) -> None:
    b = ModelBuilder()
    x = b.input("x", shape)
    b.output(b.quantize(x, scale, zp, dtype))
    rng = np.random.default_rng(len(shape) + zp + 128)
    check_int8_parity(
        b.build(), runtime, inputs=[_ties(rng, shape, scale)], min_fraction=1.0, precision=precision
    )


@pytest.mark.parametrize("shape,scale,zp,dtype", QUANTIZE_CASES)
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dequantize(runtime: str, shape, scale, zp, dtype, precision) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", shape, scale, zp, dtype)
    b.output(b.dequantize(x))
    # Float outputs compared exactly: they are the CPU's float values or not.
    r = check_int8_parity(b.build(), runtime, min_fraction=1.0, precision=precision, seed=zp + 128)
    np.testing.assert_array_equal(r.outputs[0], r.reference[0])


@pytest.mark.parametrize(
    "in_q,out_q",
    [
        ((0.05, -3, "int8"), (0.031, 9, "int8")),
        ((0.05, -3, "int8"), (0.4, -100, "int8")),
        ((0.02, 5, "int8"), (0.02, 133, "uint8")),
        ((0.3, 128, "uint8"), (0.07, 0, "int8")),
        ((0.001, 0, "int8"), (0.5, 0, "int8")),
        # Power-of-two ratios: many exact ties in the final shift, where the roundings differ.
        ((0.25, 0, "int8"), (2.0, 0, "int8")),
        ((0.25, 3, "int8"), (1.0, -5, "int8")),
    ],
)
def test_requantize(runtime: str, in_q, out_q) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (2, 3, 43), *in_q)
    b.output(b.quantize(x, *out_q))
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


def test_quantize_round_trip_is_one_partition(runtime: str) -> None:
    # float -> int8 -> requantized -> float: the boundary ops claimed together, float I/O.
    b = ModelBuilder()
    x = b.input("x", (1, 6, 6, 5))
    q = b.quantize(x, 0.02, 4)
    q = b.quantize(q, 0.05, -10)
    b.output(b.dequantize(q))
    r = check_int8_parity(b.build(), runtime, expect_partitions=1, min_fraction=1.0)
    assert r.delegate.stats()["invokes"] >= 1
