"""Ops that move data without arithmetic: TRANSPOSE, CONCATENATION, RESHAPE, SQUEEZE,
EXPAND_DIMS, PAD, SPLIT, SPLIT_V and the dynamic flatten chain."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import tflite

from clgpu_delegate.modelgen._graph import (
    _activation,
    _GraphBuilder,
    _norm_axis,
)
from clgpu_delegate.modelgen.flatbuffer import Shape


class ShapeOps(_GraphBuilder):
    """Data-movement op builders."""

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
        fields: dict[str, Any] = {"SqueezeDims": [int(a) for a in axes]} if axes else {}
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

    def _padded(self, x: int, paddings: Sequence[Sequence[int]]) -> tuple[Shape, list[Any]]:
        shape = self._check(x).shape
        p = np.array(paddings, dtype=np.int64)
        if p.shape != (len(shape), 2) or (p < 0).any():
            raise ValueError(f"paddings must be non-negative with shape ({len(shape)}, 2)")
        out = tuple(int(d + a + b) for d, (a, b) in zip(shape, p, strict=True))
        return out, p.tolist()

    def pad(self, x: int, paddings: Sequence[Sequence[int]]) -> int:
        """PAD with zeros; paddings is (rank, 2) of (before, after)."""
        out, p = self._padded(x, paddings)
        return self._op(
            tflite.BuiltinOperator.PAD,
            [x, self._int_const(p, "paddings")],
            [out],
            options="PadOptions",
            out_dtype=self.dtype(x),
        )[0]

    def pad_v2(self, x: int, paddings: Sequence[Sequence[int]], value: float) -> int:
        """PADV2: PAD with a constant value."""
        out, p = self._padded(x, paddings)
        v = self._const(np.array(value, np.float32), "constant_values")
        return self._op(
            tflite.BuiltinOperator.PADV2,
            [x, self._int_const(p, "paddings"), v],
            [out],
            options="PadV2Options",
        )[0]

    def mirror_pad(self, x: int, paddings: Sequence[Sequence[int]], mode: str = "REFLECT") -> int:
        """MIRROR_PAD, mode REFLECT or SYMMETRIC."""
        out, p = self._padded(x, paddings)
        return self._op(
            tflite.BuiltinOperator.MIRROR_PAD,
            [x, self._int_const(p, "paddings")],
            [out],
            options="MirrorPadOptions",
            out_dtype=self.dtype(x),
            Mode=getattr(tflite.MirrorPadMode, mode),
        )[0]

    def tile(self, x: int, multiples: Sequence[int]) -> int:
        """TILE: the tensor repeated `multiples[a]` times along each axis a."""
        shape = self._check(x).shape
        if len(multiples) != len(shape) or any(m < 0 for m in multiples):
            raise ValueError(f"multiples must be {len(shape)} non-negative values")
        out = tuple(int(d * m) for d, m in zip(shape, multiples, strict=True))
        return self._op(
            tflite.BuiltinOperator.TILE,
            [x, self._int_const(list(multiples), "multiples")],
            [out],
            options="TileOptions",
            out_dtype=self.dtype(x),
        )[0]

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

    def dynamic_flatten_target(self, x: int) -> int:
        """The (N, -1) target of x computed at run time: SHAPE -> STRIDED_SLICE -> PACK."""
        shape = self._check(x).shape
        if len(shape) < 1:
            raise ValueError("dynamic_flatten_target needs a tensor of rank >= 1")
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
        return self._op(
            bi.PACK,
            [batch, self._int_const(-1, "minus_one")],
            [(2,)],
            options="PackOptions",
            out_dtype=np.int32,
            ValuesCount=2,
            Axis=0,
        )[0]

    def dynamic_reshape_flatten(self, x: int, target: int | None = None) -> int:
        """Flattens to (N, -1) through SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE (or RESHAPE by
        `target`, a dynamic_flatten_target of x).

        The target shape is computed at run time, so TFLite makes the RESHAPE output dynamic.
        """
        shape = self._check(x).shape
        if target is None:
            target = self.dynamic_flatten_target(x)
        n = shape[0]
        out = (n, math.prod(shape[1:]) if n else 0)
        return self._op(
            tflite.BuiltinOperator.RESHAPE,
            [x, target],
            [out],
            options="ReshapeOptions",
            out_dtype=self.dtype(x),
        )[0]
