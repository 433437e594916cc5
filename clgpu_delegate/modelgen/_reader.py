"""The inverse of `flatbuffer.write_model`: a .tflite flatbuffer read back into the builder's
records (tensors with their constant data and quantization, ops with their option fields), so a
model can be rewritten (post-training quantization, `_ptq`) and written again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import tflite

from clgpu_delegate.modelgen.flatbuffer import _TYPES, QuantParams, _Op, _Tensor

_DTYPES: dict[int, np.dtype[Any]] = {int(v): cast("np.dtype[Any]", k) for k, v in _TYPES.items()}
_OPTION_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}


@dataclass
class ModelRecords:
    """One subgraph as the builder records it."""

    tensors: list[_Tensor]
    ops: list[_Op]
    inputs: list[int]
    outputs: list[int]


def _quant(t: Any) -> QuantParams | None:
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return None
    zps = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(q.ScaleLength(), np.int64)
    return QuantParams(
        tuple(float(s) for s in q.ScaleAsNumpy()),
        tuple(int(z) for z in zps),
        int(q.QuantizedDimension()),
    )


def _option_fields(op: Any, table: str) -> dict[str, Any]:
    """Every field of the op's options table that the builder can write back."""
    cls = getattr(tflite, table)
    opts = cls()
    raw = op.BuiltinOptions()
    opts.Init(raw.Bytes, raw.Pos)
    fields: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_") or not hasattr(tflite, f"{table}Add{name}"):
            continue
        if hasattr(cls, f"{name}AsNumpy"):
            if getattr(opts, f"{name}IsNone")():
                continue
            fields[name] = [int(v) for v in getattr(opts, f"{name}AsNumpy")()]
        else:
            fields[name] = getattr(opts, name)()
    return fields


def read_model(model: bytes) -> ModelRecords:
    """The first subgraph of `model`. Raises ValueError for what the builder cannot write back
    (several subgraphs, tensor types it does not know, custom ops)."""
    m = tflite.Model.GetRootAsModel(model, 0)
    if m.SubgraphsLength() != 1:
        raise ValueError(f"the model has {m.SubgraphsLength()} subgraphs; only one is supported")
    g = m.Subgraphs(0)
    tensors = []
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        if t.Type() not in _DTYPES:
            raise ValueError(f"tensor {i} has type {t.Type()}, which the builder cannot write")
        dtype = _DTYPES[t.Type()]
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        buf = m.Buffers(t.Buffer())
        data = None
        if buf is not None and buf.DataLength() > 0:
            data = np.frombuffer(buf.DataAsNumpy().tobytes(), dtype.newbyteorder("<"))
            data = data.reshape(shape).copy()
        tensors.append(_Tensor(t.Name().decode(), shape, dtype, data, quant=_quant(t)))
    ops = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code_entry = m.OperatorCodes(op.OpcodeIndex())
        code = max(int(code_entry.DeprecatedBuiltinCode()), int(code_entry.BuiltinCode()))
        if code == tflite.BuiltinOperator.CUSTOM:
            raise ValueError(f"op {i} is a custom op, which the builder cannot write")
        table = _OPTION_NAMES.get(op.BuiltinOptionsType()) if op.BuiltinOptionsType() else None
        fields = _option_fields(op, table) if table else {}
        ops.append(
            _Op(
                code,
                int(code_entry.Version()),
                [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else [],
                [int(v) for v in op.OutputsAsNumpy()],
                table,
                fields,
            )
        )
    return ModelRecords(
        tensors,
        ops,
        [int(v) for v in g.InputsAsNumpy()],
        [int(v) for v in g.OutputsAsNumpy()],
    )
