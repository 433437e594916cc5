"""Ops that move int8 / uint8 values without arithmetic, run by their float kernels on the
integers (OpContext::ForValues): CONCATENATION (uint8 inputs quantized unlike the output are
rescaled as TFLite does), PAD / MIRROR_PAD (the zero point as the padding), the RESHAPE family
(a flat copy, as TFLite's even where the quantization changes). Bit-exact against TFLite."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model


@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_concat_int8(runtime: str, axis: int) -> None:
    b = ModelBuilder(seed=axis + 5)
    xs = [b.input(f"x{i}", (2, 3, 4, c)) for i, c in enumerate((5, 8, 3))]
    if axis not in (3, -1):
        xs = [b.input(f"y{i}", (2, 3, 4, 5)) for i in range(3)]
    b.output(b.concat(xs, axis))
    check_int8_parity(
        quantize_model(b.build(), io="int8", seed=axis + 9), runtime, min_fraction=1.0
    )


def test_concat_uint8_requantizes(runtime: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("a", (1, 3, 5, 4), 0.05, 3, "uint8")
    y = b.quant_input("b", (1, 3, 5, 5), 0.025, 100, "uint8")
    z = b.quant_input("c", (1, 3, 5, 2), 0.1, 130, "uint8")
    out = b.concat([x, y, z], axis=3)
    b.set_quant(out, 0.1, 130)
    b.output(out)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


@pytest.mark.parametrize("op", ["pad", "mirror_pad"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_pad_int8(runtime: str, op: str, dtype: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (1, 5, 6, 3), 0.07, -20 if dtype == "int8" else 90, dtype)
    paddings = [[0, 0], [1, 2], [2, 1], [0, 1]]
    y = b.pad(x, paddings) if op == "pad" else b.mirror_pad(x, paddings)
    b.set_quant(y, 0.07, -20 if dtype == "int8" else 90)
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)


def test_reshape_family_int8(runtime: str) -> None:
    b = ModelBuilder()
    x = b.quant_input("x", (1, 4, 6, 3), 0.05, 7)
    y = b.reshape(x, (1, 24, 3))
    b.set_quant(y, 0.05, 7)
    y = b.expand_dims(y, 2)
    b.set_quant(y, 0.05, 7)
    y = b.squeeze(y, (2,))
    b.set_quant(y, 0.08, -3)  # requantized by name only: TFLite copies the integers
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0, expect_partitions=1)


def test_int8_model_with_float_io(runtime: str) -> None:
    # conv -> pad -> pool -> concat -> reshape -> FC between QUANTIZE and DEQUANTIZE: one
    # partition.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 12, 12, 3))
    y = b.conv2d(x, b.rand((8, 3, 3, 3)), b.rand((8,), 0.2), activation="RELU")
    y = b.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]])
    y = b.max_pool2d(y, 2, 2)
    y = b.concat([y, b.avg_pool2d(y, 3, 1, "SAME")], axis=3)
    y = b.reshape(y, (1, -1))
    y = b.fully_connected(y, b.rand((10, b.shape(y)[1])), b.rand((10,), 0.1))
    b.output(y)
    model = quantize_model(b.build(), io="float", seed=4)
    for precision in ("fp32", "fp16"):
        r = check_int8_parity(model, runtime, expect_partitions=1, precision=precision)
        np.testing.assert_array_equal(r.outputs[0], r.reference[0])


def _joined(b: ModelBuilder, ys: list[int]) -> int:
    """Several outputs as one: flattened and concatenated."""
    return b.concat([b.reshape(y, (1, -1)) for y in ys], axis=1)


MOVES = {
    "transpose": lambda b, x: b.transpose(x, (0, 2, 3, 1)),
    "transpose_nchw": lambda b, x: b.transpose(x, (3, 1, 2, 0)),
    "split": lambda b, x: _joined(b, b.split(x, 3, 3)),
    "split_v": lambda b, x: _joined(b, b.split_v(x, [2, -1, 3], 2)),
    "tile": lambda b, x: b.tile(x, (1, 2, 1, 3)),
    "strided_slice": lambda b, x: b.strided_slice(x, [0, 1, 0, 1], [2, 5, 7, 9], [1, 2, 3, 2]),
    "slice": lambda b, x: b.slice(x, [0, 1, 2, 1], [2, 3, -1, 5]),
    "gather": lambda b, x: b.gather(x, [2, 0, 4, 4], axis=1),
    "pack": lambda b, x: b.pack([x, b.relu(x)], axis=2),
    "unpack": lambda b, x: _joined(b, b.unpack(x, axis=1)),
    "depth_to_space": lambda b, x: b.depth_to_space(b.tile(x, (1, 1, 1, 4)), 2),
    "space_to_depth": lambda b, x: b.space_to_depth(b.slice(x, [0, 0, 0, 0], [2, 4, 6, 9]), 2),
}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_moves_int8(runtime: str, name: str) -> None:
    # Ops that only move values: their float kernels move the integers, in one partition.
    b = ModelBuilder(seed=3)
    x = b.input("x", (2, 5, 7, 9))
    b.output(MOVES[name](b, x))
    model = quantize_model(b.build(), io="int8", seed=1, jitter=0.3)
    check_int8_parity(model, runtime, min_fraction=1.0, expect_partitions=1)


def test_moves_uint8_keep_the_integers(runtime: str) -> None:
    # TFLite moves the integers as they are even where the output is quantized differently.
    b = ModelBuilder()
    x = b.quant_input("x", (1, 4, 6, 3), 0.05, 100, "uint8")
    y = b._op(39, [x, b._int_const([0, 2, 1, 3], "perm")], [(1, 6, 4, 3)],
              options="TransposeOptions", out_dtype=np.uint8)[0]
    b.set_quant(y, 0.08, 90)
    b.output(y)
    check_int8_parity(b.build(), runtime, min_fraction=1.0)
