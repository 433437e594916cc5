"""Serialisation of a recorded graph into a TFLite flatbuffer through the generated `tflite`
schema (the part of `ModelBuilder` that knows the file format)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
import numpy.typing as npt
import tflite

Shape = tuple[int, ...]

_SCHEMA_VERSION = 3
# Builtin codes above this live in `builtin_code` only; `deprecated_builtin_code` holds this value.
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
# TFLite aligns constant data for the kernels' vector loads; the converter uses 16 bytes.
_BUFFER_ALIGNMENT = 16
_FLATBUFFER_LIMIT = 2**31 - 1

_TYPES = {  # numpy dtype -> TensorType
    np.dtype(np.float32): tflite.TensorType.FLOAT32,
    np.dtype(np.float16): tflite.TensorType.FLOAT16,
    np.dtype(np.int32): tflite.TensorType.INT32,
    np.dtype(np.int64): tflite.TensorType.INT64,
    np.dtype(np.int8): tflite.TensorType.INT8,
    np.dtype(np.uint8): tflite.TensorType.UINT8,
    np.dtype(np.bool_): tflite.TensorType.BOOL,
    np.dtype(np.complex64): tflite.TensorType.COMPLEX64,
}


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization of a tensor: real = scale * (q - zero_point), one (scale, zero point)
    per tensor, or one per index of `axis` (per-channel)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int = 0


@dataclass
class _Tensor:
    name: str
    shape: Shape
    dtype: np.dtype[Any]
    data: npt.NDArray[Any] | None = None  # constant payload: a private little-endian C-order copy
    quant: QuantParams | None = None
    sparsity: Any = None  # a sparse constant's SparsityParameters (_sparse.SparseEncoding)
    # An input's shape signature (-1: a dynamic dimension, written as 1 in its shape, as
    # converters do); the graph is built at `shape`.
    signature: Shape | None = None


@dataclass
class _Op:
    code: int  # BuiltinOperator
    version: int
    inputs: list[int]  # -1 marks an omitted optional input
    outputs: list[int]
    options: str | None = None  # BuiltinOptions table name, e.g. "Conv2DOptions"
    fields: dict[str, Any] = field(default_factory=dict)  # table field -> int/float/bool/list


@dataclass
class _Subgraph:
    tensors: list[_Tensor]
    ops: list[_Op]
    inputs: list[int]
    outputs: list[int]
    name: str = "main"


def write_model(
    tensors_in: list[_Tensor],
    ops: list[_Op],
    inputs: list[int],
    outputs: list[int],
    extra_subgraphs: tuple[_Subgraph, ...] = (),
) -> bytes:
    """The model as flatbuffer bytes (schema version 3, file identifier TFL3): the graph given, then
    `extra_subgraphs` (subgraphs 1, 2, ... that control-flow ops such as CALL_ONCE name)."""
    graphs = [_Subgraph(tensors_in, ops, inputs, outputs), *extra_subgraphs]
    consts = [t.data for g in graphs for t in g.tensors if t.data is not None]
    data_size = sum(d.nbytes + _BUFFER_ALIGNMENT for d in consts)
    if data_size > _FLATBUFFER_LIMIT - (1 << 24):
        raise ValueError(f"{data_size} bytes of constants exceed the 2 GiB flatbuffer limit")
    n_tensors = sum(len(g.tensors) for g in graphs)
    fb = flatbuffers.Builder(data_size + (1 << 16) + 256 * n_tensors)

    # Buffer 0 is the empty buffer every non-constant tensor points to.
    buffers = [_table(fb, "Buffer", {})]
    opcode_index: dict[tuple[int, int], int] = {}
    subgraphs = []
    for g in graphs:
        buffer_of: dict[int, int] = {}
        for i, t in enumerate(g.tensors):
            if t.data is not None:
                buffer_of[i] = len(buffers)
                buffers.append(_table(fb, "Buffer", {"Data": _Bytes(t.data)}))
        tensors = []
        for i, t in enumerate(g.tensors):
            shape = list(t.shape)
            if t.signature is not None:
                shape = [1 if s == -1 else d for d, s in zip(shape, t.signature, strict=True)]
            tensor: dict[str, Any] = {
                "Shape": shape,
                "Type": _TYPES[t.dtype],
                "Buffer": buffer_of.get(i, 0),
                "Name": fb.CreateString(t.name),
            }
            if t.signature is not None:
                tensor["ShapeSignature"] = list(t.signature)
            if t.sparsity is not None:
                tensor["Sparsity"] = t.sparsity
            if t.quant is not None:
                tensor["Quantization"] = _quant_table(fb, t.quant)
            tensors.append(_table(fb, "Tensor", tensor))
        operators = []
        for op in g.ops:
            key = (op.code, op.version)
            opcode_index.setdefault(key, len(opcode_index))
            fields: dict[str, Any] = {
                "OpcodeIndex": opcode_index[key],
                "Inputs": op.inputs,
                "Outputs": op.outputs,
            }
            if op.options is not None:
                fields["BuiltinOptionsType"] = getattr(tflite.BuiltinOptions, op.options)
                fields["BuiltinOptions"] = _table(fb, op.options, op.fields)
            operators.append(_table(fb, "Operator", fields))
        subgraphs.append(
            _table(
                fb,
                "SubGraph",
                {
                    "Tensors": _Offsets(tensors),
                    "Inputs": g.inputs,
                    "Outputs": g.outputs,
                    "Operators": _Offsets(operators),
                    "Name": fb.CreateString(g.name),
                },
            )
        )
    codes = [
        _table(
            fb,
            "OperatorCode",
            {
                "DeprecatedBuiltinCode": min(code, _PLACEHOLDER_FOR_GREATER_OP_CODES),
                "BuiltinCode": code,
                "Version": version,
            },
        )
        for code, version in opcode_index
    ]
    model = _table(
        fb,
        "Model",
        {
            "Version": _SCHEMA_VERSION,
            "OperatorCodes": _Offsets(codes),
            "Subgraphs": _Offsets(subgraphs),
            "Buffers": _Offsets(buffers),
            "Description": fb.CreateString("clgpu_delegate.modelgen"),
        },
    )
    fb.Finish(model, file_identifier=b"TFL3")
    return bytes(memoryview(fb.Bytes)[fb.Head() :])  # one copy; Output() would add another


def _quant_table(fb: flatbuffers.Builder, q: QuantParams) -> int:
    scale = fb.CreateNumpyVector(np.array(q.scale, dtype="<f4"))
    zero_point = fb.CreateNumpyVector(np.array(q.zero_point, dtype="<i8"))
    tflite.QuantizationParametersStart(fb)
    tflite.QuantizationParametersAddScale(fb, scale)
    tflite.QuantizationParametersAddZeroPoint(fb, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(fb, q.axis)
    return int(tflite.QuantizationParametersEnd(fb))


def _table(fb: flatbuffers.Builder, table: str, fields: dict[str, Any]) -> int:
    """Writes one table of the schema through the generated `tflite.<Table>Add<Field>`."""
    # Vectors and nested objects must be finished before the table starts.
    values = {}
    for key, value in fields.items():
        if isinstance(value, _Bytes) or hasattr(value, "write"):
            value = value.write(fb)  # a vector or table that must precede this one
        elif isinstance(value, _Offsets):
            getattr(tflite, f"{table}Start{key}Vector")(fb, len(value))
            for off in reversed(value):
                fb.PrependUOffsetTRelative(off)
            value = fb.EndVector()
        elif isinstance(value, list):
            value = fb.CreateNumpyVector(np.array(value, dtype=np.int32).reshape(-1))
        values[key] = value
    getattr(tflite, f"{table}Start")(fb)
    for key, value in values.items():
        getattr(tflite, f"{table}Add{key}")(fb, value)
    return int(getattr(tflite, f"{table}End")(fb))


class _Offsets(list[int]):
    """A vector of table offsets (not int32 values) for `ModelBuilder._table`."""


class _Bytes:
    """A byte vector holding an array's data, aligned for TFLite kernels."""

    def __init__(self, data: npt.NDArray[Any]) -> None:
        self.data = data

    def write(self, fb: flatbuffers.Builder) -> int:
        n = self.data.nbytes
        fb.StartVector(1, n, _BUFFER_ALIGNMENT)
        # Same raw copy as Builder.CreateNumpyVector, but with the 16-byte alignment it lacks.
        fb.head -= n
        fb.Bytes[fb.head : fb.head + n] = self.data.reshape(-1).view(np.uint8).tobytes()
        return int(fb.EndVector())
