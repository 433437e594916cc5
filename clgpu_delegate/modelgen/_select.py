"""Ops that select and rearrange elements: STRIDED_SLICE, SLICE, GATHER, PACK, UNPACK,
DEPTH_TO_SPACE and SPACE_TO_DEPTH (constant begin/end/strides, sizes and indices)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._graph import _GraphBuilder, _norm_axis
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

    def gather(self, x: int, indices: Sequence[Any] | npt.NDArray[Any], axis: int = 0) -> int:
        """GATHER along `axis` with constant int32 indices of any shape (batch_dims 0)."""
        shape = self._check(x).shape
        ax = _norm_axis(axis, len(shape))
        idx = np.asarray(indices, np.int32)
        out = shape[:ax] + idx.shape + shape[ax + 1 :]
        return self._op(
            tflite.BuiltinOperator.GATHER,
            [x, self._const(idx, "indices")],
            [out],
            options="GatherOptions",
            out_dtype=self.dtype(x),
            Axis=int(axis),
            BatchDims=0,
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
