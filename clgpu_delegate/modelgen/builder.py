"""Write float32 TFLite models (flatbuffers) from Python without TensorFlow.

`ModelBuilder` records tensors and builtin ops with their inferred static shapes and serialises them
with the generated `tflite` schema; tests and the benchmark zoo build their models with it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tflite

from clgpu_delegate.modelgen.flatbuffer import _TYPES, Shape, _Op, _Tensor, write_model

__all__ = ["ModelBuilder"]

_INPUT_DTYPES = {"float32": np.dtype(np.float32), "int32": np.dtype(np.int32)}

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

Operand = int | np.ndarray  # a tensor id, or an array that becomes a constant


def _pair(value: int | Sequence[int], what: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(pair) != 2 or any(int(v) < 1 for v in pair):
        raise ValueError(f"{what} must be a positive int or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _activation(activation: str | None) -> int:
    key = activation.upper() if isinstance(activation, str) else activation
    if key not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; use one of {list(_ACTIVATIONS)[1:]}")
    return _ACTIVATIONS[key]


def _padding(padding: str) -> int:
    if not isinstance(padding, str) or padding.upper() not in _PADDINGS:
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return _PADDINGS[padding.upper()]


def _window_out(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    """Output length of a conv/pool window along one axis, as TFLite computes it."""
    if padding.upper() == "SAME":
        return -(-size // stride)
    out = -(-(size - (k - 1) * dilation) // stride)
    if out < 1:
        raise ValueError(f"VALID window of {k} (dilation {dilation}) does not fit in {size}")
    return out


def _norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


class ModelBuilder:
    """Builds a single-subgraph TFLite model; methods return tensor ids (ints).

    Shapes are static and inferred per op. Ops whose arguments do not fit raise ValueError.
    """

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
        data: np.ndarray | None = None,
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

    def dtype(self, t: int) -> np.dtype:
        """Element type of tensor `t`."""
        return self._check(t).dtype

    def is_const(self, t: int) -> bool:
        """Whether tensor `t` is a constant (has a data buffer)."""
        return self._check(t).data is not None

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """Adds a graph input; zero-size dimensions are allowed."""
        if dtype not in _INPUT_DTYPES:
            raise ValueError(f"input dtype must be one of {list(_INPUT_DTYPES)}, got {dtype!r}")
        if any(int(d) < 0 for d in shape):
            raise ValueError(f"input shape must not be negative, got {tuple(shape)}")
        t = self._new("input", shape, _INPUT_DTYPES[dtype], name=name)
        self._inputs.append(t)
        return t

    def const(self, array: np.ndarray, name: str | None = None) -> int:
        """Adds a constant tensor holding a copy of `array` (float32, float16, int32, ...)."""
        return self._const(array, "const", name)

    def _const(self, array: np.ndarray, prefix: str, name: str | None = None) -> int:
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

    def rand(self, shape: Sequence[int], scale: float | None = None) -> np.ndarray:
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

    def _float_input(self, t: int, rank: int | None = None) -> Shape:
        tensor = self._check(t)
        if tensor.dtype != np.float32:
            raise ValueError(f"tensor {tensor.name!r} is {tensor.dtype}, expected float32")
        if rank is not None and len(tensor.shape) != rank:
            raise ValueError(f"tensor {tensor.name!r} has shape {tensor.shape}, not rank {rank}")
        return tensor.shape

    def _weights(self, w: Operand, rank: int, fp16: bool, what: str) -> int:
        """Weights as a tensor id: float32 const, or float16 const + DEQUANTIZE when fp16."""
        if not isinstance(w, np.ndarray):
            if fp16:
                raise ValueError(f"fp16_weights needs numpy {what}, not a tensor id")
            if len(self._float_input(w)) != rank:
                raise ValueError(f"{what} tensor must have rank {rank}, got {self.shape(w)}")
            return int(w)
        if w.dtype.kind != "f" or w.ndim != rank:
            raise ValueError(f"{what} must be a float array of rank {rank}, got {w.dtype}{w.shape}")
        if not fp16:
            return self._const(w.astype(np.float32, copy=False), what)
        half = self._const(w.astype(np.float16), what + "_fp16")
        return self._op(
            tflite.BuiltinOperator.DEQUANTIZE,
            [half],
            [w.shape],
            version=3,
            options="DequantizeOptions",
        )[0]

    def _bias(self, bias: Operand | None, n: int, fp16: bool) -> int:
        if bias is None:
            return -1
        if isinstance(bias, np.ndarray) and bias.shape != (n,):
            raise ValueError(f"bias must have shape ({n},), got {bias.shape}")
        if not isinstance(bias, np.ndarray) and self.shape(bias) != (n,):
            raise ValueError(f"bias must have shape ({n},), got {self.shape(bias)}")
        return self._weights(bias, 1, fp16, "bias")

    # ---- delegate ops --------------------------------------------------------------------------

    def conv2d(
        self,
        x: int,
        filters: Operand,
        bias: Operand | None = None,
        stride: int | Sequence[int] = (1, 1),
        dilation: int | Sequence[int] = (1, 1),
        padding: str = "SAME",
        activation: str | None = None,
        fp16_weights: bool = False,
    ) -> int:
        """CONV_2D; filters OHWI, bias (O,) (zeros when None: TFLite needs a bias tensor)."""
        n, h, w, c = self._float_input(x, 4)
        f = self._weights(filters, 4, fp16_weights, "filters")
        o, kh, kw, i = self.shape(f)
        if i != c:
            raise ValueError(f"filters take {i} input channels, the input has {c}")
        (sh, sw), (dh, dw) = _pair(stride, "stride"), _pair(dilation, "dilation")
        pad = _padding(padding)
        out = (n, _window_out(h, kh, sh, dh, padding), _window_out(w, kw, sw, dw, padding), o)
        # TFLite's float conv kernels require the bias input, so a missing bias becomes zeros.
        bias = np.zeros(o, np.float32) if bias is None else bias
        inputs = [x, f, self._bias(bias, o, fp16_weights)]
        return self._op(
            tflite.BuiltinOperator.CONV_2D,
            inputs,
            [out],
            options="Conv2DOptions",
            Padding=pad,
            StrideW=sw,
            StrideH=sh,
            DilationWFactor=dw,
            DilationHFactor=dh,
            FusedActivationFunction=_activation(activation),
        )[0]

    def depthwise_conv2d(
        self,
        x: int,
        filters: Operand,
        bias: Operand | None = None,
        stride: int | Sequence[int] = (1, 1),
        dilation: int | Sequence[int] = (1, 1),
        padding: str = "SAME",
        depth_multiplier: int = 1,
        activation: str | None = None,
        fp16_weights: bool = False,
    ) -> int:
        """DEPTHWISE_CONV_2D; filters (1, KH, KW, C * depth_multiplier), bias (C * M,) or zeros."""
        n, h, w, c = self._float_input(x, 4)
        f = self._weights(filters, 4, fp16_weights, "filters")
        one, kh, kw, cm = self.shape(f)
        if one != 1 or depth_multiplier < 1 or cm != c * depth_multiplier:
            raise ValueError(
                f"depthwise filters {self.shape(f)} do not match {c} input channels "
                f"x depth_multiplier {depth_multiplier}"
            )
        (sh, sw), (dh, dw) = _pair(stride, "stride"), _pair(dilation, "dilation")
        pad = _padding(padding)
        out = (n, _window_out(h, kh, sh, dh, padding), _window_out(w, kw, sw, dw, padding), cm)
        bias = np.zeros(cm, np.float32) if bias is None else bias
        inputs = [x, f, self._bias(bias, cm, fp16_weights)]
        version = 2 if (dh, dw) != (1, 1) else 1
        return self._op(
            tflite.BuiltinOperator.DEPTHWISE_CONV_2D,
            inputs,
            [out],
            version=version,
            options="DepthwiseConv2DOptions",
            Padding=pad,
            StrideW=sw,
            StrideH=sh,
            DepthMultiplier=depth_multiplier,
            DilationWFactor=dw,
            DilationHFactor=dh,
            FusedActivationFunction=_activation(activation),
        )[0]

    def fully_connected(
        self,
        x: int,
        weights: Operand,
        bias: Operand | None = None,
        activation: str | None = None,
        keep_num_dims: bool = False,
        fp16_weights: bool = False,
    ) -> int:
        """FULLY_CONNECTED; weights (N_out, K). Without bias, input 2 is -1 (converter style).

        The input is flattened to (size // K, K) unless keep_num_dims (then its last dim is K).
        """
        shape = self._float_input(x)
        wt = self._weights(weights, 2, fp16_weights, "weights")
        n_out, k = self.shape(wt)
        size = math.prod(shape)
        if not shape or k == 0 or size % k or (keep_num_dims and shape[-1] != k):
            raise ValueError(
                f"input {shape} does not fit weights {(n_out, k)}"
                f"{' with keep_num_dims' if keep_num_dims else ''}"
            )
        out = shape[:-1] + (n_out,) if keep_num_dims else (size // k, n_out)
        return self._op(
            tflite.BuiltinOperator.FULLY_CONNECTED,
            [x, wt, self._bias(bias, n_out, fp16_weights)],
            [out],
            version=5 if keep_num_dims else 1,
            options="FullyConnectedOptions",
            FusedActivationFunction=_activation(activation),
            KeepNumDims=bool(keep_num_dims),
        )[0]

    def _binary(
        self, code: int, options: str, a: Operand, b2: Operand, activation: str | None
    ) -> int:
        ta, tb = self._operand(a, "lhs"), self._operand(b2, "rhs")
        if self.dtype(ta) != self.dtype(tb):
            raise ValueError(f"operand types differ: {self.dtype(ta)} vs {self.dtype(tb)}")
        try:
            out = np.broadcast_shapes(self.shape(ta), self.shape(tb))
        except ValueError as e:
            raise ValueError(f"cannot broadcast {self.shape(ta)} with {self.shape(tb)}") from e
        return self._op(
            code,
            [ta, tb],
            [out],
            options=options,
            out_dtype=self.dtype(ta),
            FusedActivationFunction=_activation(activation),
        )[0]

    def add(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """ADD with numpy broadcasting; numpy operands become constants."""
        return self._binary(tflite.BuiltinOperator.ADD, "AddOptions", a, b2, activation)

    def transpose(self, x: int, perm: Sequence[int]) -> int:
        """TRANSPOSE with a constant int32 permutation."""
        shape = self._check(x).shape
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(len(shape))):
            raise ValueError(f"perm {perm} is not a permutation of the {len(shape)} axes")
        version = 6 if len(shape) > 5 else 4 if len(shape) > 4 else 1
        return self._op(
            tflite.BuiltinOperator.TRANSPOSE,
            [x, self._int_const(perm, "perm")],
            [tuple(shape[p] for p in perm)],
            version=version,
            options="TransposeOptions",
            out_dtype=self.dtype(x),
        )[0]

    # ---- ops the delegate leaves on the CPU ----------------------------------------------------

    def mul(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """MUL with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.MUL, "MulOptions", a, b2, activation)

    def sub(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """SUB with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.SUB, "SubOptions", a, b2, activation)

    def _unary(self, code: int, x: int, options: str | None = None) -> int:
        return self._op(code, [x], [self._float_input(x)], options=options)[0]

    def relu(self, x: int) -> int:
        """RELU."""
        return self._unary(tflite.BuiltinOperator.RELU, x)

    def relu6(self, x: int) -> int:
        """RELU6."""
        return self._unary(tflite.BuiltinOperator.RELU6, x)

    def tanh(self, x: int) -> int:
        """TANH."""
        return self._unary(tflite.BuiltinOperator.TANH, x)

    def logistic(self, x: int) -> int:
        """LOGISTIC (sigmoid)."""
        return self._unary(tflite.BuiltinOperator.LOGISTIC, x)

    def hard_swish(self, x: int) -> int:
        """HARD_SWISH."""
        return self._unary(tflite.BuiltinOperator.HARD_SWISH, x, "HardSwishOptions")

    def _pool(
        self,
        code: int,
        x: int,
        size: int | Sequence[int],
        stride: int | Sequence[int],
        padding: str,
        activation: str | None,
    ) -> int:
        n, h, w, c = self._float_input(x, 4)
        (kh, kw), (sh, sw) = _pair(size, "pool size"), _pair(stride, "stride")
        pad = _padding(padding)
        out = (n, _window_out(h, kh, sh, 1, padding), _window_out(w, kw, sw, 1, padding), c)
        return self._op(
            code,
            [x],
            [out],
            options="Pool2DOptions",
            Padding=pad,
            StrideW=sw,
            StrideH=sh,
            FilterWidth=kw,
            FilterHeight=kh,
            FusedActivationFunction=_activation(activation),
        )[0]

    def max_pool2d(
        self,
        x: int,
        size: int | Sequence[int],
        stride: int | Sequence[int],
        padding: str = "VALID",
        activation: str | None = None,
    ) -> int:
        """MAX_POOL_2D."""
        return self._pool(tflite.BuiltinOperator.MAX_POOL_2D, x, size, stride, padding, activation)

    def avg_pool2d(
        self,
        x: int,
        size: int | Sequence[int],
        stride: int | Sequence[int],
        padding: str = "VALID",
        activation: str | None = None,
    ) -> int:
        """AVERAGE_POOL_2D."""
        return self._pool(
            tflite.BuiltinOperator.AVERAGE_POOL_2D, x, size, stride, padding, activation
        )

    def concat(self, tensors: Sequence[int], axis: int, activation: str | None = None) -> int:
        """CONCATENATION along `axis` (negative counts from the end)."""
        if not tensors:
            raise ValueError("concat needs at least one tensor")
        shapes = [self._check(t).shape for t in tensors]
        dtype = self.dtype(tensors[0])
        ax = _norm_axis(axis, len(shapes[0]))
        for s, t in zip(shapes, tensors, strict=True):
            rest, rest0 = s[:ax] + s[ax + 1 :], shapes[0][:ax] + shapes[0][ax + 1 :]
            if len(s) != len(shapes[0]) or self.dtype(t) != dtype or rest != rest0:
                raise ValueError(f"cannot concatenate shapes {shapes} along axis {axis}")
        out = list(shapes[0])
        out[ax] = sum(s[ax] for s in shapes)
        return self._op(
            tflite.BuiltinOperator.CONCATENATION,
            list(tensors),
            [tuple(out)],
            options="ConcatenationOptions",
            out_dtype=dtype,
            Axis=ax,
            FusedActivationFunction=_activation(activation),
        )[0]

    def reshape(
        self,
        x: int,
        new_shape: Sequence[int],
        *,
        resolve: bool = True,
        shape_tensor: bool = True,
    ) -> int:
        """RESHAPE to `new_shape` (one -1 allowed): a constant shape tensor and ReshapeOptions.

        `resolve=False` keeps the -1 in the model for the runtime to resolve, as converters
        write a flatten of unknown batch; `shape_tensor=False` leaves the target only in
        ReshapeOptions (the one-input form).
        """
        shape = self._check(x).shape
        new = [int(d) for d in new_shape]
        size, known = math.prod(shape), math.prod(d for d in new if d != -1)
        if new.count(-1) > 1 or any(d < -1 for d in new):
            raise ValueError(f"bad reshape target {tuple(new_shape)}")
        target = list(new)
        if -1 in new:
            if known == 0 or size % known:
                raise ValueError(f"cannot reshape {shape} to {tuple(new_shape)}")
            new[new.index(-1)] = size // known
        if math.prod(new) != size:
            raise ValueError(f"cannot reshape {shape} to {tuple(new_shape)}")
        if resolve:
            target = new
        inputs = [x, self._int_const(target, "new_shape")] if shape_tensor else [x]
        return self._op(
            tflite.BuiltinOperator.RESHAPE,
            inputs,
            [tuple(new)],
            options="ReshapeOptions",
            out_dtype=self.dtype(x),
            NewShape=target,
        )[0]

    def squeeze(self, x: int, axes: Sequence[int] | None = None) -> int:
        """SQUEEZE `axes` (each of extent 1, negative from the end), or every axis of extent 1."""
        shape = self._check(x).shape
        if axes:
            drop = {_norm_axis(int(a), len(shape)) for a in axes}
            if any(shape[a] != 1 for a in drop):
                raise ValueError(f"cannot squeeze axes {tuple(axes)} of {shape}")
        else:
            drop = {i for i, d in enumerate(shape) if d == 1}
        fields = {"SqueezeDims": [int(a) for a in axes]} if axes else {}
        return self._op(
            tflite.BuiltinOperator.SQUEEZE,
            [x],
            [tuple(d for i, d in enumerate(shape) if i not in drop)],
            options="SqueezeOptions",
            out_dtype=self.dtype(x),
            **fields,
        )[0]

    def expand_dims(self, x: int, axis: int) -> int:
        """EXPAND_DIMS: a new axis of extent 1 at `axis` (negative counts from the end)."""
        shape = self._check(x).shape
        a = _norm_axis(int(axis), len(shape) + 1)
        return self._op(
            tflite.BuiltinOperator.EXPAND_DIMS,
            [x, self._int_const(int(axis), "axis")],
            [shape[:a] + (1,) + shape[a:]],
            options="ExpandDimsOptions",
            out_dtype=self.dtype(x),
        )[0]

    def pad(self, x: int, paddings: Sequence[Sequence[int]]) -> int:
        """PAD with zeros; paddings is (rank, 2) of (before, after)."""
        shape = self._check(x).shape
        p = np.array(paddings, dtype=np.int64)
        if p.shape != (len(shape), 2) or (p < 0).any():
            raise ValueError(f"paddings must be non-negative with shape ({len(shape)}, 2)")
        out = tuple(int(d + a + b) for d, (a, b) in zip(shape, p, strict=True))
        return self._op(
            tflite.BuiltinOperator.PAD,
            [x, self._int_const(p.tolist(), "paddings")],
            [out],
            options="PadOptions",
            out_dtype=self.dtype(x),
        )[0]

    def mean(self, x: int, axes: Sequence[int], keep_dims: bool = False) -> int:
        """MEAN over `axes`."""
        shape = self._float_input(x)
        axes_n = sorted({_norm_axis(int(a), len(shape)) for a in axes})
        if not axes_n:
            raise ValueError("mean needs at least one axis")
        if keep_dims:
            out = tuple(1 if i in axes_n else d for i, d in enumerate(shape))
        else:
            out = tuple(d for i, d in enumerate(shape) if i not in axes_n)
        return self._op(
            tflite.BuiltinOperator.MEAN,
            [x, self._int_const(axes_n, "axes")],
            [out],
            options="ReducerOptions",
            KeepDims=bool(keep_dims),
        )[0]

    def softmax(self, x: int, beta: float = 1.0) -> int:
        """SOFTMAX over the last axis."""
        return self._op(
            tflite.BuiltinOperator.SOFTMAX,
            [x],
            [self._float_input(x)],
            options="SoftmaxOptions",
            Beta=float(beta),
        )[0]

    def _resize(
        self,
        code: int,
        options: str,
        x: int,
        size: Sequence[int],
        align_corners: bool,
        half_pixel_centers: bool,
    ) -> int:
        n, _, _, c = self._float_input(x, 4)
        oh, ow = _pair(tuple(size), "resize size")
        return self._op(
            code,
            [x, self._int_const([oh, ow], "size")],
            [(n, oh, ow, c)],
            options=options,
            AlignCorners=bool(align_corners),
            HalfPixelCenters=bool(half_pixel_centers),
        )[0]

    def resize_nearest(
        self,
        x: int,
        size: Sequence[int],
        align_corners: bool = False,
        half_pixel_centers: bool = False,
    ) -> int:
        """RESIZE_NEAREST_NEIGHBOR to (h, w)."""
        return self._resize(
            tflite.BuiltinOperator.RESIZE_NEAREST_NEIGHBOR,
            "ResizeNearestNeighborOptions",
            x,
            size,
            align_corners,
            half_pixel_centers,
        )

    def resize_bilinear(
        self,
        x: int,
        size: Sequence[int],
        align_corners: bool = False,
        half_pixel_centers: bool = False,
    ) -> int:
        """RESIZE_BILINEAR to (h, w)."""
        return self._resize(
            tflite.BuiltinOperator.RESIZE_BILINEAR,
            "ResizeBilinearOptions",
            x,
            size,
            align_corners,
            half_pixel_centers,
        )

    def split(self, x: int, axis: int, num: int) -> list[int]:
        """SPLIT into `num` equal parts along `axis`."""
        shape = self._check(x).shape
        ax = _norm_axis(axis, len(shape))
        if num < 1 or shape[ax] % num:
            raise ValueError(f"cannot split dim {shape[ax]} of {shape} into {num} parts")
        part = shape[:ax] + (shape[ax] // num,) + shape[ax + 1 :]
        return self._op(
            tflite.BuiltinOperator.SPLIT,
            [self._int_const(ax, "axis"), x],
            [part] * num,
            options="SplitOptions",
            out_dtype=self.dtype(x),
            NumSplits=num,
        )

    def split_v(self, x: int, sizes: Sequence[int], axis: int) -> list[int]:
        """SPLIT_V into parts of `sizes` along `axis` (one size may be -1: the remainder)."""
        shape = self._check(x).shape
        ax = _norm_axis(axis, len(shape))
        known = sum(s for s in sizes if s != -1)
        parts = [shape[ax] - known if s == -1 else s for s in sizes]
        if sum(parts) != shape[ax] or min(parts, default=0) < 0:
            raise ValueError(f"cannot split dim {shape[ax]} of {shape} into {list(sizes)}")
        return self._op(
            tflite.BuiltinOperator.SPLIT_V,
            [x, self._int_const(list(sizes), "size_splits"), self._int_const(ax, "axis")],
            [shape[:ax] + (p,) + shape[ax + 1 :] for p in parts],
            options="SplitVOptions",
            out_dtype=self.dtype(x),
            NumSplits=len(sizes),
        )

    def dynamic_reshape_flatten(self, x: int) -> int:
        """Flattens to (N, -1) through SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE.

        The target shape is computed at run time, so TFLite makes the RESHAPE output dynamic.
        """
        shape = self._check(x).shape
        if len(shape) < 1:
            raise ValueError("dynamic_reshape_flatten needs a tensor of rank >= 1")
        bi = tflite.BuiltinOperator
        dims = self._op(
            bi.SHAPE,
            [x],
            [(len(shape),)],
            options="ShapeOptions",
            out_dtype=np.int32,
            OutType=tflite.TensorType.INT32,
        )[0]
        batch = self._op(
            bi.STRIDED_SLICE,
            [
                dims,
                self._int_const([0], "begin"),
                self._int_const([1], "end"),
                self._int_const([1], "strides"),
            ],
            [()],
            options="StridedSliceOptions",
            out_dtype=np.int32,
            ShrinkAxisMask=1,
        )[0]
        target = self._op(
            bi.PACK,
            [batch, self._int_const(-1, "minus_one")],
            [(2,)],
            options="PackOptions",
            out_dtype=np.int32,
            ValuesCount=2,
            Axis=0,
        )[0]
        n = shape[0]
        out = (n, math.prod(shape[1:]) if n else 0)
        return self._op(
            bi.RESHAPE, [x, target], [out], options="ReshapeOptions", out_dtype=self.dtype(x)
        )[0]

    # ---- graph outputs and serialisation -------------------------------------------------------

    def output(self, t: int) -> None:
        """Marks tensor `t` as the next graph output."""
        self._check(t)
        if t in self._outputs:
            raise ValueError(f"tensor {self._tensors[t].name!r} is already an output")
        self._outputs.append(int(t))

    def build(self) -> bytes:
        """Serialises the model (schema version 3, file identifier TFL3)."""
        if not self._outputs:
            raise ValueError("the model has no outputs; call output() first")
        return write_model(self._tensors, self._ops, self._inputs, self._outputs)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Writes build() to `path` and returns it as a Path."""
        path = Path(path)
        path.write_bytes(self.build())
        return path
