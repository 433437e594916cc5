"""A QUANTIZE folded into the float op writing its input (fusion/requantize.cc): a DEQUANTIZE's
(tests/test_fusion_prelu_form.py) or, here, a float element-wise op's of two operands of its size,
whose binary_same kernel stores the result quantized as the QUANTIZE does (kernels/binary.cl's
QUANT_STORE, quant.cl's quantize_one). litert-torch's int8 models add their residuals in float
between DEQUANTIZEs and a QUANTIZE. Bit for bit with TFLite's CPU kernels, with the pass on and
off; a broadcasting op keeps its QUANTIZE."""

from __future__ import annotations

import numpy as np
import pytest
from folds import folded_nodes, launches
from parity import check_parity
from test_fusion_prelu_form import _litert, _slopes

from clgpu_delegate.modelgen import ModelBuilder

NO_REQUANTIZE = "affine,pad,clamp,epilogue,residual,views,squeeze,depthwise,prelu,expand"
EXACT = {"profiling": True, "expect_delegated": "all", "rtol": 0.0, "atol": 0.0}


def _island(
    shape: tuple[int, ...], op: str = "add", dtype: str = "int8", prelu: bool = False
) -> bytes:
    """DEQUANTIZE two quantized inputs, an element-wise op of them (litert-torch's PRELU form
    after it), QUANTIZE."""
    zp = (3, -9, -20) if dtype == "int8" else (131, 120, 100)
    b = ModelBuilder(seed=len(shape) + shape[-1])
    x = b.quant_input("x", shape, 0.05, zp[0], dtype)
    y = b.quant_input("y", shape, 0.07, zp[1], dtype)
    h = getattr(b, op)(b.dequantize(x), b.dequantize(y))
    if prelu:
        h = _litert(b, h, _slopes(shape[-1], True).reshape(shape[-1]))
    b.output(b.quantize(h, 0.04, zp[2], dtype=dtype))
    return b.build()


@pytest.mark.parametrize(
    "shape,op,dtype",
    [
        ((1, 5, 8, 16), "add", "int8"),  # whole runs of four and of the NEON loop's eight
        ((1, 7, 9, 6), "add", "int8"),  # a scalar tail
        ((1, 6, 6, 8), "sub", "int8"),
        ((1, 6, 6, 8), "mul", "int8"),
        ((1, 6, 6, 8), "maximum", "int8"),
        ((1, 7, 5, 8), "add", "uint8"),
    ],
)
def test_an_element_wise_op_stores_its_quantize(
    runtime: str, shape: tuple[int, ...], op: str, dtype: str
) -> None:
    model = _island(shape, op, dtype)
    on = check_parity(model, runtime, **EXACT)
    off = check_parity(model, runtime, fuse=NO_REQUANTIZE, **EXACT)
    assert launches(on) == launches(off) - 1, on.delegate.profile().table()
    assert folded_nodes(on, "elementwise+QUANTIZE") == 1


def test_a_residual_add_with_its_prelu_and_quantize_in_one_kernel(runtime: str) -> None:
    # litert-torch's int8 PRELU block: the ADD takes the form's slopes (prelu pass), then the
    # QUANTIZE: two DEQUANTIZEs and one ADD launch.
    model = _island((1, 6, 7, 12), prelu=True)
    r = check_parity(model, runtime, **EXACT)
    assert launches(r) == 3, r.delegate.profile().table()
    assert folded_nodes(r, "elementwise+PRELU+QUANTIZE") == 1


def test_a_broadcasting_op_keeps_its_quantize(runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.quant_input("x", (1, 5, 5, 8), 0.05, 2)
    h = b.add(b.dequantize(x), np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 1, 1, 8))
    b.output(b.quantize(h, 0.04, -5))
    r = check_parity(b.build(), runtime, **EXACT)
    assert "QUANTIZE" in {k.op for k in r.delegate.profile().kernels}
