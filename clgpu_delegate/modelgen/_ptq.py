"""Post-training int8 quantization of a float32 model, without TensorFlow: run it on calibration
inputs (TFLite's reference kernels, every tensor kept), give each activation the affine
parameters of its observed range, quantize weights symmetrically (per channel by default) and
biases to int32, and keep float I/O through QUANTIZE / DEQUANTIZE at the model's boundary.

Ops whose int8 kernels in TFLite pass values through unscaled (pooling, reshapes, padding,
concatenation, ...) share one set of parameters between their inputs and outputs, as TF's
converter arranges; SOFTMAX / LOGISTIC / TANH outputs get TFLite's fixed parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._quant import (
    affine_params,
    int32_bias,
    quantize_array,
    symmetric_weights,
)
from clgpu_delegate.modelgen._reader import ModelRecords, read_model
from clgpu_delegate.modelgen.flatbuffer import QuantParams, _Op, _Tensor, write_model

_B = tflite.BuiltinOperator
# Ops whose int8 outputs are their inputs' values moved, not rescaled: one parameter set.
_TIED = {
    _B.MAX_POOL_2D,
    _B.AVERAGE_POOL_2D,
    _B.RESHAPE,
    _B.SQUEEZE,
    _B.EXPAND_DIMS,
    _B.PAD,
    _B.PADV2,
    _B.MIRROR_PAD,
    _B.TRANSPOSE,
    _B.CONCATENATION,
    _B.SPLIT,
    _B.SPLIT_V,
    _B.TILE,
    _B.RESIZE_NEAREST_NEIGHBOR,
    _B.RESIZE_BILINEAR,
    _B.MAXIMUM,
    _B.MINIMUM,
    _B.REDUCE_MAX,
    _B.REDUCE_MIN,
    _B.STRIDED_SLICE,
    _B.SLICE,
    _B.GATHER,
    _B.DEPTH_TO_SPACE,
    _B.SPACE_TO_DEPTH,
    _B.PACK,
    _B.UNPACK,
}
# TFLite's fixed output parameters (scale, zero point) of int8 ops with a bounded range.
_FIXED = {
    _B.SOFTMAX: (1.0 / 256, -128),
    _B.LOGISTIC: (1.0 / 256, -128),
    _B.TANH: (1.0 / 128, 0),
    _B.LOG_SOFTMAX: (16.0 / 256, 127),
}
# Ops with a filter (input 1, quantized along `axis`) and an int32 bias (input `bias`).
_FILTERED = {
    _B.CONV_2D: (0, 2),
    _B.DEPTHWISE_CONV_2D: (3, 2),
    _B.FULLY_CONNECTED: (0, 2),
    _B.TRANSPOSE_CONV: (0, 3),
}


def calibrate(
    model: bytes, inputs: Sequence[Sequence[npt.NDArray[Any]]], runtime: str | None = None
) -> dict[int, tuple[float, float]]:
    """The (min, max) of every float32 tensor over the calibration samples (each a list of the
    model's inputs), on TFLite's reference kernels."""
    from clgpu_delegate.runtime import make_interpreter

    interp = make_interpreter(model, runtime=runtime, reference=True, preserve_all_tensors=True)
    interp.allocate_tensors()
    ranges: dict[int, tuple[float, float]] = {}
    for sample in inputs:
        for d, x in zip(interp.get_input_details(), sample, strict=True):
            interp.set_tensor(d["index"], x)
        interp.invoke()
        for d in interp.get_tensor_details():
            if d["dtype"] != np.float32:
                continue
            try:
                v = interp.get_tensor(d["index"])
            except ValueError:  # a tensor the runtime never allocated
                continue
            if v.size == 0:
                continue
            lo, hi = float(v.min()), float(v.max())
            old = ranges.get(d["index"], (lo, hi))
            ranges[d["index"]] = (min(lo, old[0]), max(hi, old[1]))
    return ranges


class _Groups:
    """Union-find over tensors that must share quantization parameters."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, t: int) -> int:
        while self.parent.get(t, t) != t:
            t = self.parent[t]
        return t

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _activation_params(
    m: ModelRecords,
    ranges: dict[int, tuple[float, float]],
    rng: np.random.Generator | None,
    jitter: float,
    pow2_scales: bool,
) -> dict[int, QuantParams]:
    const = {i for i, t in enumerate(m.tensors) if t.data is not None}
    groups = _Groups()
    fixed: dict[int, QuantParams] = {}
    for op in m.ops:
        if op.code in _TIED:
            data = [t for t in op.inputs[:1] + op.outputs if t >= 0 and t not in const]
            if op.code in (_B.CONCATENATION, _B.PACK):
                data = [t for t in op.inputs + op.outputs if t >= 0 and t not in const]
            for t in data[1:]:
                groups.union(t, data[0])
        if op.code in _FIXED:
            scale, zp = _FIXED[op.code]
            fixed[op.outputs[0]] = QuantParams((scale,), (zp,))
    members: dict[int, list[int]] = {}
    for t in ranges:
        if t not in const:
            members.setdefault(groups.find(t), []).append(t)
    params: dict[int, QuantParams] = {}
    for tensors in members.values():
        pinned = [fixed[t] for t in tensors if t in fixed]
        if pinned:
            q = pinned[0]
        else:
            lo = min(ranges[t][0] for t in tensors)
            hi = max(ranges[t][1] for t in tensors)
            if rng is not None and jitter > 0:
                f = float(np.exp(rng.uniform(-jitter, jitter)))
                shift = float(rng.uniform(-jitter, jitter)) * (hi - lo)
                lo, hi = lo * f + shift, hi * f + shift
            q = affine_params(lo, hi, pow2_scale=pow2_scales)
        for t in tensors:
            params[t] = q
    return params


def quantize_model(
    model: bytes,
    samples: Sequence[Sequence[npt.NDArray[Any]]] | int = 4,
    *,
    per_channel: bool = True,
    io: str = "float",
    seed: int = 0,
    jitter: float = 0.0,
    pow2_scales: bool = False,
    runtime: str | None = None,
) -> bytes:
    """An int8 version of the float32 `model`.

    samples: calibration inputs, or a count of seeded N(0, 1) samples. per_channel: one weight
    scale per output channel (else per tensor). io: "float" keeps float32 inputs and outputs
    (QUANTIZE / DEQUANTIZE at the boundary), "int8" makes them int8. jitter > 0 widens, narrows
    and shifts each calibrated range at random (log-scale factor and shift up to `jitter`), so
    tests see saturation and unusual zero points. pow2_scales: every scale a power of two, so the
    fixed-point multipliers are too and their final shifts meet exact ties, where the CPU
    kernels' roundings differ.
    """
    if io not in ("float", "int8"):
        raise ValueError(f"io must be 'float' or 'int8', got {io!r}")
    m = read_model(model)
    if any(t.dtype == np.float16 for t in m.tensors):
        raise ValueError("the model has float16 tensors; quantize its float32 version")
    rng = np.random.default_rng(seed)
    if isinstance(samples, int):
        samples = [
            [rng.standard_normal(m.tensors[t].shape).astype(np.float32) for t in m.inputs]
            for _ in range(samples)
        ]
    # The runtime may add tensors of its own (im2col buffers) after the model's.
    ranges = {t: r for t, r in calibrate(model, samples, runtime).items() if t < len(m.tensors)}
    params = _activation_params(m, ranges, rng, jitter, pow2_scales)
    tensors = list(m.tensors)
    for t, q in params.items():
        x = tensors[t]
        tensors[t] = _Tensor(x.name, x.shape, np.dtype(np.int8), None, quant=q)
    done: set[int] = set()
    for op in m.ops:
        if op.code in _FILTERED:
            axis, bias_at = _FILTERED[op.code]
            w = op.inputs[1]
            w_data = tensors[w].data
            if w in done or w_data is None:
                continue
            per = per_channel or op.code == _B.DEPTHWISE_CONV_2D
            data, wq = symmetric_weights(w_data, axis if per else None, pow2_scales)
            tensors[w] = _Tensor(
                tensors[w].name, tensors[w].shape, np.dtype(np.int8), data, quant=wq
            )
            done.add(w)
            b = op.inputs[bias_at] if len(op.inputs) > bias_at else -1
            src = op.inputs[2] if op.code == _B.TRANSPOSE_CONV else op.inputs[0]
            b_data = tensors[b].data if b >= 0 else None
            if b_data is not None and b not in done:
                bq_data, bq = int32_bias(b_data, params[src].scale[0], wq)
                tensors[b] = _Tensor(
                    tensors[b].name, tensors[b].shape, np.dtype(np.int32), bq_data, quant=bq
                )
                done.add(b)
    for i, x in enumerate(tensors):  # any other float constant: int8 per tensor
        if x.data is not None and x.dtype == np.float32 and i not in done:
            q = affine_params(
                float(x.data.min(initial=0)), float(x.data.max(initial=0)), pow2_scale=pow2_scales
            )
            tensors[i] = _Tensor(
                x.name, x.shape, np.dtype(np.int8), quantize_array(x.data, q, "int8"), quant=q
            )
    ops = list(m.ops)
    inputs, outputs = list(m.inputs), list(m.outputs)
    if io == "float":
        head, tail = [], []
        for k, t in enumerate(inputs):
            f = len(tensors)
            tensors.append(
                _Tensor(tensors[t].name + "_float", tensors[t].shape, np.dtype(np.float32))
            )
            head.append(_Op(_B.QUANTIZE, 2, [f], [t], "QuantizeOptions", {}))
            inputs[k] = f
        for k, t in enumerate(outputs):
            f = len(tensors)
            tensors.append(
                _Tensor(tensors[t].name + "_float", tensors[t].shape, np.dtype(np.float32))
            )
            tail.append(_Op(_B.DEQUANTIZE, 2, [t], [f], "DequantizeOptions", {}))
            outputs[k] = f
        ops = head + ops + tail
    return write_model(tensors, ops, inputs, outputs)
