"""The op-independent half of `ModelBuilder`: tensors, constants, op records, outputs and
serialisation, and the argument helpers the op families share (activation, padding, windows)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen.flatbuffer import (
    _TYPES,
    Shape,
    _Op,
    _Subgraph,
    _Tensor,
    write_model,
)

_INPUT_DTYPES = {
    "float32": np.dtype(np.float32),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}

_ACTIVATIONS = {
    None: tflite.ActivationFunctionType.NONE,
    "NONE": tflite.ActivationFunctionType.NONE,
    "RELU": tflite.ActivationFunctionType.RELU,
    "RELU_N1_TO_1": tflite.ActivationFunctionType.RELU_N1_TO_1,
    "RELU6": tflite.ActivationFunctionType.RELU6,
    "TANH": tflite.ActivationFunctionType.TANH,
    "SIGN_BIT": tflite.ActivationFunctionType.SIGN_BIT,
}
_PADDINGS = {"SAME": tflite.Padding.SAME, "VALID": tflite.Padding.VALID}

_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}

Operand = int | npt.NDArray[Any]  # a tensor id, or an array that becomes a constant


def _pair(value: int | Sequence[int], what: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(pair) != 2 or any(int(v) < 1 for v in pair):
        raise ValueError(f"{what} must be a positive int or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _activation(activation: str | None) -> int:
    key = activation.upper() if isinstance(activation, str) else activation
    if key not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; use one of {list(_ACTIVATIONS)[1:]}")
    return int(_ACTIVATIONS[key])


def _padding(padding: str) -> int:
    if not isinstance(padding, str) or padding.upper() not in _PADDINGS:
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return int(_PADDINGS[padding.upper()])


def _window_out(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    """Output length of a conv/pool window along one axis, as TFLite computes it."""
    if padding.upper() == "SAME":
        return -(-size // stride)
    out = -(-(size - (k - 1) * dilation) // stride)
    if out < 1:
        raise ValueError(f"VALID window of {k} (dilation {dilation}) does not fit in {size}")
    return out


def _window(
    hw: tuple[int, int],
    k: tuple[int, int],
    stride: int | Sequence[int],
    padding: str,
    dilation: int | Sequence[int] | None = None,
) -> tuple[int, int, dict[str, int]]:
    """Output (height, width) of a 2-D window op, and its Padding / Stride (/ Dilation when
    given) option fields; pooling has no dilation fields."""
    (sh, sw), (dh, dw) = _pair(stride, "stride"), _pair(dilation or 1, "dilation")
    opts = {"Padding": _padding(padding), "StrideW": sw, "StrideH": sh}
    if dilation is not None:
        opts |= {"DilationWFactor": dw, "DilationHFactor": dh}
    oh = _window_out(hw[0], k[0], sh, dh, padding)
    return oh, _window_out(hw[1], k[1], sw, dw, padding), opts


def _norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


class _GraphBuilder:
    """Tensors and op records of one subgraph; the op families (see builder.py) add ops."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self._tensors: list[_Tensor] = []
        self._ops: list[_Op] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self._names: set[str] = set()
        self._counters: dict[str, int] = {}

    # ---- tensors -------------------------------------------------------------------------------

    def _name(self, name: str | None, prefix: str) -> str:
        if name is not None:
            if name in self._names:
                raise ValueError(f"tensor name {name!r} is already used")
        else:
            while True:
                n = self._counters.get(prefix, 0)
                self._counters[prefix] = n + 1
                name = f"{prefix}_{n}"
                if name not in self._names:
                    break
        self._names.add(name)
        return name

    def _new(
        self,
        prefix: str,
        shape: Sequence[int],
        dtype: Any = np.float32,
        name: str | None = None,
        data: npt.NDArray[Any] | None = None,
    ) -> int:
        shape = tuple(int(d) for d in shape)
        self._tensors.append(_Tensor(self._name(name, prefix), shape, np.dtype(dtype), data))
        return len(self._tensors) - 1

    def _check(self, t: int) -> _Tensor:
        if (
            not isinstance(t, int | np.integer)
            or isinstance(t, bool)
            or not 0 <= t < len(self._tensors)
        ):
            raise ValueError(f"{t!r} is not a tensor id of this builder")
        return self._tensors[t]

    def shape(self, t: int) -> Shape:
        """Static shape of tensor `t`."""
        return self._check(t).shape

    def dtype(self, t: int) -> np.dtype[Any]:
        """Element type of tensor `t`."""
        return self._check(t).dtype

    def is_const(self, t: int) -> bool:
        """Whether tensor `t` is a constant (has a data buffer)."""
        return self._check(t).data is not None

    def input(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "float32",
        signature: Sequence[int] | None = None,
    ) -> int:
        """Adds a graph input; zero-size dimensions are allowed. `signature`: its shape
        signature, -1 for a dynamic dimension (the model then declares 1 there, as converters
        write it; the graph is built at `shape`)."""
        if dtype not in _INPUT_DTYPES:
            raise ValueError(f"input dtype must be one of {list(_INPUT_DTYPES)}, got {dtype!r}")
        if any(int(d) < 0 for d in shape):
            raise ValueError(f"input shape must not be negative, got {tuple(shape)}")
        if signature is not None and (
            len(signature) != len(shape)
            or any(s not in (-1, d) for s, d in zip(signature, shape, strict=True))
        ):
            raise ValueError(f"signature {tuple(signature)} does not fit shape {tuple(shape)}")
        t = self._new("input", shape, _INPUT_DTYPES[dtype], name=name)
        if signature is not None:
            self._tensors[t].signature = tuple(int(s) for s in signature)
        self._inputs.append(t)
        return t

    def const(self, array: npt.NDArray[Any], name: str | None = None) -> int:
        """Adds a constant tensor holding a copy of `array` (float32, float16, int32, ...)."""
        return self._const(array, "const", name)

    def _const(self, array: npt.NDArray[Any], prefix: str, name: str | None = None) -> int:
        if not isinstance(array, np.ndarray) or array.dtype not in _TYPES:
            kind = getattr(array, "dtype", type(array).__name__)
            raise ValueError(f"const needs a numpy array of {[str(d) for d in _TYPES]}, got {kind}")
        data = np.array(array, dtype=array.dtype.newbyteorder("<"), order="C", copy=True)
        return self._new(prefix, array.shape, array.dtype, name=name, data=data)

    def _operand(self, value: Operand | float, what: str) -> int:
        """Tensor id for an op operand; float arrays and Python floats become float32 consts."""
        if isinstance(value, float):
            value = np.array(value, np.float32)
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "f":
                value = value.astype(np.float32, copy=False)
            return self._const(value, what)
        self._check(value)
        return int(value)

    def _int_const(self, values: Sequence[int] | int, what: str) -> int:
        return self._const(np.array(values, np.int32), what)

    def rand(self, shape: Sequence[int], scale: float | None = None) -> npt.NDArray[Any]:
        """Seeded normal float32 weights; default std is He's sqrt(2 / fan_in).

        fan_in is prod(shape[1:]) (OHWI filters, (N, K) FC weights), or shape[0] for 1-D shapes.
        Depthwise filters (1, KH, KW, C) should pass scale=sqrt(2 / (KH * KW)).
        """
        shape = tuple(int(d) for d in shape)
        if scale is None:
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else (shape[0] if shape else 1)
            scale = math.sqrt(2.0 / max(fan_in, 1))
        out = self._rng.standard_normal(shape, dtype=np.float32)
        out *= np.float32(scale)
        return out

    # ---- op plumbing ---------------------------------------------------------------------------

    def _op(
        self,
        code: int,
        inputs: list[int],
        out_shapes: Sequence[Shape],
        *,
        options: str | None = None,
        version: int = 1,
        out_dtype: Any = np.float32,
        **fields: Any,
    ) -> list[int]:
        prefix = _OP_NAMES[code].lower()
        outs = [self._new(prefix, s, out_dtype) for s in out_shapes]
        self._ops.append(_Op(code, version, inputs, outs, options, fields))
        return outs

    def call_once(self, init_subgraph: int) -> None:
        """CALL_ONCE: runs subgraph `init_subgraph` (see build()) before the first invoke, as
        converters do to initialise resource variables; it has no inputs or outputs."""
        if init_subgraph < 1:
            raise ValueError(
                f"init_subgraph must name a subgraph after this one, not {init_subgraph}"
            )
        self._op(
            tflite.BuiltinOperator.CALL_ONCE,
            [],
            [],
            options="CallOnceOptions",
            InitSubgraphIndex=init_subgraph,
        )

    def _float_input(self, t: int, rank: int | None = None) -> Shape:
        tensor = self._check(t)
        if tensor.dtype != np.float32:
            raise ValueError(f"tensor {tensor.name!r} is {tensor.dtype}, expected float32")
        if rank is not None and len(tensor.shape) != rank:
            raise ValueError(f"tensor {tensor.name!r} has shape {tensor.shape}, not rank {rank}")
        return tensor.shape

    # ---- graph outputs and serialisation -------------------------------------------------------

    def output(self, t: int) -> None:
        """Marks tensor `t` as the next graph output."""
        self._check(t)
        if t in self._outputs:
            raise ValueError(f"tensor {self._tensors[t].name!r} is already an output")
        self._outputs.append(int(t))

    def build(self, subgraphs: Sequence[_GraphBuilder] = ()) -> bytes:
        """Serialises the model (schema version 3, file identifier TFL3). `subgraphs` become
        subgraphs 1, 2, ... (the graphs a CALL_ONCE, IF or WHILE of this one names); they may
        have no outputs."""
        if not self._outputs:
            raise ValueError("the model has no outputs; call output() first")
        extra = tuple(
            _Subgraph(g._tensors, g._ops, g._inputs, g._outputs, f"subgraph_{i + 1}")
            for i, g in enumerate(subgraphs)
        )
        return write_model(self._tensors, self._ops, self._inputs, self._outputs, extra)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Writes build() to `path` and returns it as a Path."""
        path = Path(path)
        path.write_bytes(self.build())
        return path
