"""Dynamic-range quantization of a float32 model, as TF's converter does without a representative
dataset: the constant float weights of FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D and
BATCH_MATMUL (and GATHER's table) become int8 with a symmetric scale (zero point 0, per tensor or
per output channel) while activations stay float32.

Two forms: "hybrid" gives the op the int8 weight itself (TFLite runs its hybrid kernels, which
quantize the activations on the fly), "dequantize" puts a DEQUANTIZE of the int8 constant in
front of the unchanged float op (always for GATHER, which has no hybrid kernel). "float" writes
the float model whose weights are the int8 weights' dequantized values: the reference a delegate
computing in float should match."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._quant import symmetric_weights
from clgpu_delegate.modelgen._reader import read_model
from clgpu_delegate.modelgen.flatbuffer import _Op, _Tensor, write_model

_B = tflite.BuiltinOperator
# Op -> (the weight input, its output-channel axis; None: BATCH_MATMUL's, from adj_y).
WEIGHT_OPS: dict[int, tuple[int, int | None]] = {
    _B.FULLY_CONNECTED: (1, 0),
    _B.CONV_2D: (1, 0),
    _B.DEPTHWISE_CONV_2D: (1, 3),
    _B.BATCH_MATMUL: (1, None),
    _B.GATHER: (0, 0),  # an embedding table: rows
}
# Ops without a hybrid kernel: their weights go behind a DEQUANTIZE in the "hybrid" form too, as
# TF's converter writes them.
_DEQUANTIZE_ONLY = {_B.GATHER}
# The option tables with TFLite's asymmetric_quantize_inputs (hybrid kernels only).
_ASYMMETRIC = {"FullyConnectedOptions", "BatchMatMulOptions"}
FORMS = ("hybrid", "dequantize", "float")


def _channel_axis(op: _Op, rank: int) -> int:
    axis = WEIGHT_OPS[op.code][1]
    if axis is not None:
        return axis
    return rank - 2 if op.fields.get("AdjY") else rank - 1  # y[..., K, N]: N


def dynamic_range_model(
    model: bytes,
    *,
    per_channel: bool = True,
    form: str = "hybrid",
    asymmetric_inputs: bool = False,
    ops: set[int] | None = None,
) -> bytes:
    """The dynamic-range variant of the float32 `model` (module docstring for `form`).

    per_channel: one scale per output channel (dim 0 of FULLY_CONNECTED / CONV_2D filters, dim 3
    of DEPTHWISE_CONV_2D's, N of BATCH_MATMUL's y, a GATHER table's rows), else one per tensor.
    asymmetric_inputs: sets the hybrid FULLY_CONNECTED's and BATCH_MATMUL's
    asymmetric_quantize_inputs. ops: the op codes
    whose weights to quantize (default all of WEIGHT_OPS). Weights computed at run time stay.
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    m = read_model(model)
    tensors = list(m.tensors)
    new_ops: list[_Op] = []
    head: list[_Op] = []  # DEQUANTIZEs of constants, before every op
    done: set[int] = set()  # weights already rewritten (one tensor may feed several ops)
    for op in m.ops:
        fields: dict[str, Any] = dict(op.fields)
        inputs = list(op.inputs)
        wanted = op.code in WEIGHT_OPS and (ops is None or op.code in ops)
        at = WEIGHT_OPS[op.code][0] if wanted else -1
        w = inputs[at] if 0 <= at < len(inputs) else -1
        x = tensors[w] if w >= 0 else None
        if x is not None and (w in done or (x.data is not None and x.dtype == np.float32)):
            if w not in done and x.data is not None:
                done.add(w)
                axis = _channel_axis(op, len(x.shape)) if per_channel else None
                q, params = symmetric_weights(x.data, axis)
                if form == "float":
                    real = (q.astype(np.float32) * _scales(params.scale, axis, q.ndim)).astype(
                        np.float32
                    )
                    tensors[w] = _Tensor(x.name, x.shape, np.dtype(np.float32), real)
                elif form == "hybrid" and op.code not in _DEQUANTIZE_ONLY:
                    tensors[w] = _Tensor(x.name, x.shape, np.dtype(np.int8), q, quant=params)
                else:
                    tensors.append(
                        _Tensor(x.name + "_int8", x.shape, np.dtype(np.int8), q, quant=params)
                    )
                    tensors[w] = _Tensor(x.name, x.shape, np.dtype(np.float32))
                    head.append(
                        _Op(_B.DEQUANTIZE, 2, [len(tensors) - 1], [w], "DequantizeOptions", {})
                    )
            if form == "hybrid" and asymmetric_inputs and op.options in _ASYMMETRIC:
                fields["AsymmetricQuantizeInputs"] = True
        new_ops.append(_Op(op.code, op.version, inputs, list(op.outputs), op.options, fields))
    return write_model(tensors, head + new_ops, list(m.inputs), list(m.outputs))


def _scales(scale: tuple[float, ...], axis: int | None, rank: int) -> npt.NDArray[np.float32]:
    s = np.asarray(scale, np.float32)
    if axis is None or len(scale) == 1:
        return s.reshape(())
    shape = [1] * rank
    shape[axis] = len(scale)
    return s.reshape(shape)
