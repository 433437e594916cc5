"""Ops that select and rearrange elements: STRIDED_SLICE, SLICE, GATHER, PACK, UNPACK,
DEPTH_TO_SPACE and SPACE_TO_DEPTH (constant begin/end/strides, sizes and indices)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._graph import Operand, _GraphBuilder, _norm_axis
from clgpu_delegate.modelgen.flatbuffer import Shape


def _strided_slice_shape(
    shape: Shape,
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int],
    masks: dict[str, int],
    offset: bool,
) -> Shape:
    """The output shape, through numpy's indexing (the semantics TF's StridedSlice follows)."""
    index: list[Any] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        bit = 1 << i
        if masks["EllipsisMask"] & bit:
            index.append(Ellipsis)
        elif masks["NewAxisMask"] & bit:
            index.append(None)
        elif masks["ShrinkAxisMask"] & bit:
            index.append(int(b))
        else:
            start = None if masks["BeginMask"] & bit else int(b)
            stop = None if masks["EndMask"] & bit else int(e)
            if offset and stop is not None:
                if s <= 0:
                    raise ValueError("the builder supports offset=True with positive strides only")
                stop = int(e) + (0 if start is None else start)
            index.append(slice(start, stop, int(s)))
    try:
        return tuple(int(d) for d in np.empty(shape, np.uint8)[tuple(index)].shape)
    except IndexError as err:
        raise ValueError(f"strided slice {index} does not fit {shape}: {err}") from err


class SelectOps(_GraphBuilder):
    """Element-selection op builders."""

    def strided_slice(
        self,
        x: int,
        begin: Sequence[int],
        end: Sequence[int],
        strides: Sequence[int] | None = None,
        *,
        begin_mask: int = 0,
        end_mask: int = 0,
        ellipsis_mask: int = 0,
        new_axis_mask: int = 0,
        shrink_axis_mask: int = 0,
        offset: bool = False,
        out_shape: Sequence[int] | None = None,
    ) -> int:
        """STRIDED_SLICE with constant int32 begin/end/strides and TFLite's masks.

        `offset` (op version 8) makes `end` a size counted from `begin`. `out_shape` overrides the
        declared output shape (the runtime resizes it anyway)."""
        shape = self._check(x).shape
        strides = [1] * len(begin) if strides is None else list(strides)
        if not len(begin) == len(end) == len(strides):
            raise ValueError("begin, end and strides must have the same length")
        masks = {
            "BeginMask": begin_mask,
            "EndMask": end_mask,
            "EllipsisMask": ellipsis_mask,
            "NewAxisMask": new_axis_mask,
            "ShrinkAxisMask": shrink_axis_mask,
        }
        out = (
            tuple(out_shape)
            if out_shape is not None
            else _strided_slice_shape(shape, begin, end, strides, masks, offset)
        )
        version = (
            8 if offset else 5 if len(shape) > 4 else 4 if ellipsis_mask or new_axis_mask else 1
        )
        fields: dict[str, Any] = dict(masks)
        if offset:
            fields["Offset"] = True
        return self._op(
            tflite.BuiltinOperator.STRIDED_SLICE,
            [
                x,
                self._int_const(list(begin), "begin"),
                self._int_const(list(end), "end"),
                self._int_const(strides, "strides"),
            ],
            [out],
            options="StridedSliceOptions",
            version=version,
            out_dtype=self.dtype(x),
            **fields,
        )[0]

    def slice(self, x: int, begin: Sequence[int], size: Sequence[int]) -> int:
        """SLICE with constant int32 begin and size (-1: to the end of the axis)."""
        shape = self._check(x).shape
        if len(begin) != len(shape) or len(size) != len(shape):
            raise ValueError(f"begin and size must have {len(shape)} entries")
        out = []
        for d, b, s in zip(shape, begin, size, strict=True):
            n = d - b if s == -1 else s
            if b < 0 or n < 0 or b + n > d:
                raise ValueError(
                    f"slice begin {list(begin)} size {list(size)} does not fit {shape}"
                )
            out.append(int(n))
        return self._op(
            tflite.BuiltinOperator.SLICE,
            [x, self._int_const(list(begin), "begin"), self._int_const(list(size), "size")],
            [tuple(out)],
            options="SliceOptions",
            version=5 if len(shape) > 4 else 1,
            out_dtype=self.dtype(x),
        )[0]

    def gather(
        self, x: Operand, indices: Sequence[Any] | npt.NDArray[Any] | int, axis: int = 0
    ) -> int:
        """GATHER along `axis` (batch_dims 0) of a tensor or a constant array `x`, with constant
        int32 indices of any shape (a Python int: one index, a 0-d constant)."""
        idx = np.asarray(indices, np.int32)
        return self._gather(
            self._operand(x, "params"), self._const(idx, "indices"), idx.shape, axis
        )

    def gather_at(self, x: Operand, positions: int, axis: int = 0) -> int:
        """GATHER along `axis` (batch_dims 0) at run-time positions: `positions` an int32 or
        int64 tensor of any shape."""
        if self.dtype(positions) not in (np.int32, np.int64):
            raise ValueError("run-time GATHER positions must be an int32 or int64 tensor")
        return self._gather(
            self._operand(x, "params"), positions, self._check(positions).shape, axis
        )

    def _gather(self, xt: int, idx_t: int, idx_shape: Sequence[int], axis: int) -> int:
        shape = self._check(xt).shape
        ax = _norm_axis(axis, len(shape))
        out = shape[:ax] + tuple(idx_shape) + shape[ax + 1 :]
        return self._op(
            tflite.BuiltinOperator.GATHER,
            [xt, idx_t],
            [out],
            options="GatherOptions",
            out_dtype=self.dtype(xt),
            Axis=int(axis),
            BatchDims=0,
        )[0]

    def embedding_lookup(self, ids: int, table: Operand) -> int:
        """EMBEDDING_LOOKUP: rows `ids` (a 1-D int32 tensor) of `table` (rank >= 2; a float
        array, or a tensor such as an int8 constant for TFLite's hybrid kernel)."""
        if self.dtype(ids) != np.int32 or len(self._check(ids).shape) != 1:
            raise ValueError("EMBEDDING_LOOKUP ids must be a 1-D int32 tensor")
        t = self._operand(table, "table")
        shape = self._check(t).shape
        if len(shape) < 2:
            raise ValueError("EMBEDDING_LOOKUP needs a table of rank 2 or more")
        out = (self._check(ids).shape[0],) + tuple(shape[1:])
        return self._op(
            tflite.BuiltinOperator.EMBEDDING_LOOKUP, [ids, t], [out], out_dtype=np.float32
        )[0]

    def pack(self, tensors: Sequence[int], axis: int = 0) -> int:
        """PACK (stack) tensors of one shape along a new axis `axis`."""
        if not tensors:
            raise ValueError("pack needs at least one tensor")
        shape = self._check(tensors[0]).shape
        if any(self._check(t).shape != shape for t in tensors):
            raise ValueError("pack needs tensors of one shape")
        ax = _norm_axis(axis, len(shape) + 1)
        return self._op(
            tflite.BuiltinOperator.PACK,
            list(tensors),
            [shape[:ax] + (len(tensors),) + shape[ax:]],
            options="PackOptions",
            out_dtype=self.dtype(tensors[0]),
            ValuesCount=len(tensors),
            Axis=int(axis),
        )[0]

    def unpack(self, x: int, axis: int = 0) -> list[int]:
        """UNPACK (unstack) along `axis`: one output per index, the axis removed."""
        shape = self._check(x).shape
        ax = _norm_axis(axis, len(shape))
        return self._op(
            tflite.BuiltinOperator.UNPACK,
            [x],
            [shape[:ax] + shape[ax + 1 :]] * shape[ax],
            options="UnpackOptions",
            out_dtype=self.dtype(x),
            Num=shape[ax],
            Axis=int(axis),
        )

    def depth_to_space(self, x: int, block: int) -> int:
        """DEPTH_TO_SPACE of NHWC (DCR order, as TFLite)."""
        n, h, w, c = self._float_input(x, 4)
        if block < 1 or c % (block * block):
            raise ValueError(f"{c} channels do not split into {block}x{block} blocks")
        return self._op(
            tflite.BuiltinOperator.DEPTH_TO_SPACE,
            [x],
            [(n, h * block, w * block, c // (block * block))],
            options="DepthToSpaceOptions",
            BlockSize=block,
        )[0]

    def space_to_depth(self, x: int, block: int) -> int:
        """SPACE_TO_DEPTH of NHWC."""
        n, h, w, c = self._float_input(x, 4)
        if block < 1 or h % block or w % block:
            raise ValueError(f"{h}x{w} does not split into {block}x{block} blocks")
        return self._op(
            tflite.BuiltinOperator.SPACE_TO_DEPTH,
            [x],
            [(n, h // block, w // block, c * block * block)],
            options="SpaceToDepthOptions",
            BlockSize=block,
        )[0]
