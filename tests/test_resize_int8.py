"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR on int8 tensors (and uint8 nearest) against
TFLite's 8-bit kernels, bit for bit: nearest's 16.16 fixed-point sources (2 -> 50 is where float
indexing would differ), bilinear's integer weights, every align_corners / half_pixel_centers
mode, up- and downsampling."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

SIZES = [
    ((1, 5, 7, 3), (10, 14)),
    ((2, 4, 4, 8), (7, 9)),
    ((1, 6, 5, 5), (3, 2)),
    ((1, 2, 2, 3), (50, 50)),
]
MODES = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("case", SIZES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("mode", MODES, ids=lambda m: f"align{int(m[0])}-half{int(m[1])}")
@pytest.mark.parametrize("kind", ["nearest", "bilinear"])
def test_resize_int8(runtime: str, case, mode, kind: str) -> None:
    shape, size = case
    b = ModelBuilder()
    x = b.input("x", shape)
    resize = b.resize_nearest if kind == "nearest" else b.resize_bilinear
    b.output(resize(x, size, align_corners=mode[0], half_pixel_centers=mode[1]))
    model = quantize_model(b.build(), io="int8", seed=shape[-1], jitter=0.3)
    check_int8_parity(model, runtime, min_fraction=1.0)


def test_resize_nearest_uint8(runtime: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (1, 3, 5, 4), 0.1, 128, "uint8")
    y = b._op(
        97,
        [x, b._int_const([7, 11], "size")],
        [(1, 7, 11, 4)],
        options="ResizeNearestNeighborOptions",
        out_dtype=np.uint8,
    )[0]
    b.set_quant(y, 0.1, 128)
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)
