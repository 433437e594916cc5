"""Sparse constants behind DENSIFY, as TFLite's schema stores them (SparsityParameters: a
traversal order over the tensor's axes and its blocks, and per level either a dense extent or
CSR segments and indices): MediaPipe writes its pruned conv weights this way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._graph import _GraphBuilder

_INDEX_TYPES = {  # SparseIndexVector member -> numpy type and table prefix
    "int32": (np.int32, tflite.SparseIndexVector.Int32Vector, "Int32Vector"),
    "uint16": (np.uint16, tflite.SparseIndexVector.Uint16Vector, "Uint16Vector"),
    "uint8": (np.uint8, tflite.SparseIndexVector.Uint8Vector, "Uint8Vector"),
}


@dataclass
class _Level:
    csr: bool
    size: int  # a dense level's extent
    segments: list[int] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)


@dataclass
class SparseEncoding:
    """One tensor's SparsityParameters; `write` serialises the table (flatbuffer.write_model)."""

    traversal_order: list[int]
    block_map: list[int]
    levels: list[_Level]
    index_type: str | None = None  # None: the narrowest type that holds every array

    def _vector(self, fb: flatbuffers.Builder, values: list[int]) -> tuple[int, int]:
        name = self.index_type
        if name is None:
            top = max(values, default=0)
            name = "uint8" if top < 256 else "uint16" if top < 65536 else "int32"
        dtype, kind, table = _INDEX_TYPES[name]
        vec = fb.CreateNumpyVector(np.array(values, dtype))
        getattr(tflite, f"{table}Start")(fb)
        getattr(tflite, f"{table}AddValues")(fb, vec)
        return int(kind), int(getattr(tflite, f"{table}End")(fb))

    def write(self, fb: flatbuffers.Builder) -> int:
        metas = []
        for lv in self.levels:
            seg = idx = None
            if lv.csr:
                seg, idx = self._vector(fb, lv.segments), self._vector(fb, lv.indices)
            tflite.DimensionMetadataStart(fb)
            tflite.DimensionMetadataAddFormat(
                fb, tflite.DimensionType.SPARSE_CSR if lv.csr else tflite.DimensionType.DENSE
            )
            tflite.DimensionMetadataAddDenseSize(fb, 0 if lv.csr else lv.size)
            if seg and idx:
                tflite.DimensionMetadataAddArraySegmentsType(fb, seg[0])
                tflite.DimensionMetadataAddArraySegments(fb, seg[1])
                tflite.DimensionMetadataAddArrayIndicesType(fb, idx[0])
                tflite.DimensionMetadataAddArrayIndices(fb, idx[1])
            metas.append(tflite.DimensionMetadataEnd(fb))
        order = fb.CreateNumpyVector(np.array(self.traversal_order, np.int32))
        blocks = fb.CreateNumpyVector(np.array(self.block_map, np.int32))
        tflite.SparsityParametersStartDimMetadataVector(fb, len(metas))
        for m in reversed(metas):
            fb.PrependUOffsetTRelative(m)
        dims = fb.EndVector()
        tflite.SparsityParametersStart(fb)
        tflite.SparsityParametersAddTraversalOrder(fb, order)
        tflite.SparsityParametersAddBlockMap(fb, blocks)
        tflite.SparsityParametersAddDimMetadata(fb, dims)
        return int(tflite.SparsityParametersEnd(fb))


def encode_sparse(
    dense: npt.NDArray[Any],
    block_map: Sequence[int] = (),
    block_size: Sequence[int] = (),
    traversal_order: Sequence[int] | None = None,
    csr_levels: Sequence[int] | None = None,
) -> tuple[npt.NDArray[Any], SparseEncoding]:
    """The stored values and the encoding of `dense`: axes `block_map[b]` cut into blocks of
    `block_size[b]`; levels walk the blocked axes then the blocks in `traversal_order`; the
    levels in `csr_levels` (default: the last of the blocked ones) keep only the indices whose
    sub-tree holds a non-zero."""
    rank, k = dense.ndim, len(block_map)
    if len(block_size) != k or list(block_map) != sorted(set(block_map)):
        raise ValueError("block_map must be ascending axes, one block size each")
    order = list(range(rank + k)) if traversal_order is None else [int(t) for t in traversal_order]
    if sorted(order) != list(range(rank + k)) or order[rank:] != list(range(rank, rank + k)):
        raise ValueError("traversal_order must permute the axes, then list the blocks in order")
    csr = {rank - 1} if csr_levels is None else set(csr_levels)
    # The expanded array: axis i the blocked part of dense axis i, axis rank + b block b.
    split: list[int] = []
    origin: list[int] = []  # expanded axis of each split axis
    for i, d in enumerate(dense.shape):
        if i in block_map:
            b = list(block_map).index(i)
            if d % block_size[b]:
                raise ValueError(f"block size {block_size[b]} does not divide axis {i} ({d})")
            split += [d // block_size[b], block_size[b]]
            origin += [i, rank + b]
        else:
            split.append(d)
            origin.append(i)
    x = dense.reshape(split).transpose(np.argsort(origin, kind="stable"))
    x = x.transpose(order)
    levels = [_Level(lv in csr, int(x.shape[lv])) for lv in range(rank + k)]
    for lv in levels:
        if lv.csr:
            lv.segments = [0]
    values: list[Any] = []

    def walk(level: int, sub: npt.NDArray[Any]) -> None:
        if level == len(levels):
            values.append(sub)
            return
        lv = levels[level]
        for i in range(lv.size):
            if not lv.csr:
                walk(level + 1, sub[i])
            elif np.any(sub[i] != 0):
                lv.indices.append(i)
                walk(level + 1, sub[i])
        if lv.csr:
            lv.segments.append(len(lv.indices))

    walk(0, x)
    stored = np.array(values, dense.dtype).reshape(-1)
    return stored, SparseEncoding(order, list(block_map), levels)


class SparseOps(_GraphBuilder):
    """DENSIFY of sparse constants."""

    def sparse_const(
        self,
        dense: npt.NDArray[Any],
        *,
        fp16: bool = False,
        block_map: Sequence[int] = (),
        block_size: Sequence[int] = (),
        traversal_order: Sequence[int] | None = None,
        csr_levels: Sequence[int] | None = None,
        index_type: str | None = None,
    ) -> int:
        """A float32 tensor holding `dense`, stored sparse behind DENSIFY (see encode_sparse);
        with fp16=True the sparse values are FLOAT16 and a DEQUANTIZE follows, as MediaPipe's
        pose_detection stores its 1x1 conv weights."""
        dtype = np.float16 if fp16 else np.float32
        stored, enc = encode_sparse(
            np.asarray(dense, dtype), block_map, block_size, traversal_order, csr_levels
        )
        enc.index_type = index_type
        sparse = self._const(stored, "sparse")
        t = self._tensors[sparse]
        t.shape = tuple(int(d) for d in dense.shape)
        t.sparsity = enc
        out = self._op(
            tflite.BuiltinOperator.DENSIFY,
            [sparse],
            [t.shape],
            options="DensifyOptions",
            out_dtype=dtype,
        )[0]
        if not fp16:
            return out
        return self._op(
            tflite.BuiltinOperator.DEQUANTIZE,
            [out],
            [t.shape],
            version=3,
            options="DequantizeOptions",
        )[0]
