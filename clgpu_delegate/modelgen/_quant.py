"""Quantized tensors: affine parameters from a value range, symmetric int8 weights (per channel
or per tensor), int32 biases, and the builder's QUANTIZE / DEQUANTIZE and quantized inputs.

A quantized value is real = scale * (q - zero_point), as in TFLite's schema."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._graph import _GraphBuilder
from clgpu_delegate.modelgen.flatbuffer import QuantParams

_QTYPES = {"int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8)}


def qrange(dtype: np.dtype[np.generic] | str) -> tuple[int, int]:
    """The integer range of a quantized type."""
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def pow2(scale: float) -> float:
    """The power of two nearest to `scale` (in log scale)."""
    return float(2.0 ** round(np.log2(scale)))


def affine_params(
    lo: float, hi: float, dtype: str = "int8", pow2_scale: bool = False
) -> QuantParams:
    """Per-tensor parameters covering [lo, hi] (widened to hold 0, as TFLite's converter does,
    so that zero is exact: the padding of convs and pools). pow2_scale: a power-of-two scale."""
    qmin, qmax = qrange(dtype)
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / (qmax - qmin)
    if not scale > 0:
        scale = 1.0 / (qmax - qmin)
    if pow2_scale:
        scale = pow2(scale)
    zero_point = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return QuantParams((float(np.float32(scale)),), (zero_point,))


def quantize_array(x: npt.NDArray[Any], q: QuantParams, dtype: str) -> npt.NDArray[Any]:
    """TFLite's affine quantization of an array: round half away from zero, then saturate."""
    qmin, qmax = qrange(dtype)
    scale = np.asarray(q.scale, np.float32)
    zp = np.asarray(q.zero_point, np.int64)
    if len(q.scale) > 1:
        shape = [1] * x.ndim
        shape[q.axis] = len(q.scale)
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    r = (x.astype(np.float32) / scale).astype(np.float64)
    v = np.floor(np.abs(r) + 0.5) * np.sign(r)  # half away from zero, as std::round
    out: npt.NDArray[Any] = np.clip(v.astype(np.int64) + zp, qmin, qmax).astype(_QTYPES[dtype])
    return out


def symmetric_weights(
    w: npt.NDArray[Any], axis: int | None, pow2_scale: bool = False
) -> tuple[npt.NDArray[np.int8], QuantParams]:
    """int8 weights with zero point 0 and a scale per index of `axis` (None: one scale),
    max |w| -> 127, as TFLite's converter quantizes filters (pow2_scale: powers of two)."""
    w = w.astype(np.float32)
    if axis is None:
        peak = np.array([np.abs(w).max(initial=0.0)], np.float32)
    else:
        peak = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(axis=1, initial=0.0)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    if pow2_scale:
        scales = np.array([pow2(float(v)) for v in scales], np.float32)
    q = QuantParams(tuple(float(s) for s in scales), (0,) * len(scales), axis or 0)
    return quantize_array(w, q, "int8").astype(np.int8), q


def int32_bias(
    b: npt.NDArray[Any], input_scale: float, weight: QuantParams
) -> tuple[npt.NDArray[np.int32], QuantParams]:
    """The int32 bias of a conv / FC: scale input_scale * weight scale (per channel), zero point
    0."""
    scales = np.float32(input_scale) * np.asarray(weight.scale, np.float32)
    scales = np.broadcast_to(scales, b.shape).astype(np.float32)
    q = QuantParams(tuple(float(s) for s in scales), (0,) * len(scales), 0)
    v = np.round(b.astype(np.float64) / scales)
    return np.clip(v, -(2**31), 2**31 - 1).astype(np.int32), q


class QuantOps(_GraphBuilder):
    """Quantized inputs, QUANTIZE and DEQUANTIZE builders."""

    def set_quant(
        self,
        t: int,
        scale: float | Sequence[float],
        zero_point: int | Sequence[int] = 0,
        axis: int = 0,
    ) -> None:
        """Sets the quantization of tensor `t` (per channel along `axis` when given sequences)."""
        tensor = self._check(t)
        scales = (scale,) if isinstance(scale, float | int) else tuple(scale)
        zps = (zero_point,) * len(scales) if isinstance(zero_point, int) else tuple(zero_point)
        if len(zps) != len(scales) or any(not s > 0 for s in scales):
            raise ValueError(f"bad quantization for {tensor.name!r}: {scales}, {zps}")
        tensor.quant = QuantParams(tuple(float(s) for s in scales), zps, axis)

    def quant_input(
        self, name: str, shape: Sequence[int], scale: float, zero_point: int, dtype: str = "int8"
    ) -> int:
        """A quantized graph input (int8 or uint8)."""
        if dtype not in _QTYPES:
            raise ValueError(f"dtype must be one of {list(_QTYPES)}, got {dtype!r}")
        t = self._new("input", shape, _QTYPES[dtype], name=name)
        self.set_quant(t, scale, zero_point)
        self._inputs.append(t)
        return t

    def quantize(self, x: int, scale: float, zero_point: int, dtype: str = "int8") -> int:
        """QUANTIZE: float32 -> int8/uint8, or a requantization between quantized types."""
        if dtype not in _QTYPES:
            raise ValueError(f"dtype must be one of {list(_QTYPES)}, got {dtype!r}")
        src = self._check(x)
        if src.dtype != np.float32 and src.quant is None:
            raise ValueError(f"tensor {src.name!r} is neither float32 nor quantized")
        out = self._op(
            tflite.BuiltinOperator.QUANTIZE,
            [x],
            [src.shape],
            version=2,
            out_dtype=_QTYPES[dtype],
            options="QuantizeOptions",
        )[0]
        self.set_quant(out, scale, zero_point)
        return out

    def dequantize(self, x: int) -> int:
        """DEQUANTIZE of a quantized tensor to float32."""
        src = self._check(x)
        if src.quant is None or src.data is not None:
            raise ValueError(f"tensor {src.name!r} is not a quantized activation")
        return self._op(
            tflite.BuiltinOperator.DEQUANTIZE,
            [x],
            [src.shape],
            version=2,
            options="DequantizeOptions",
        )[0]
