"""The data-movement ops and sparse weights in the random parity suite (tests/random_models.py):
one op with random parameters on a tensor of rank 1-5 (`select_case`), and graph steps on an NHWC
activation (`SELECT_STEPS`): crops and subsampling by STRIDED_SLICE and SLICE, channels picked
by GATHER, UNPACK + PACK, SPACE_TO_DEPTH / DEPTH_TO_SPACE around a conv, and 1x1 convs whose
pruned weights are sparse constants behind DENSIFY (sometimes FLOAT16 behind a DEQUANTIZE).
`g` is random_models' case generator (rng, builder, op log)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def select_case(g: Any) -> list[int]:
    """One data-movement op with random parameters on a tensor of rank 1-5."""
    b = g.b
    name = g.pick(("strided_slice", "slice", "gather", "pack", "unpack", "depth_to_space",
                   "space_to_depth"))
    if name in ("depth_to_space", "space_to_depth"):
        k = g.pick((2, 3))
        n, h, w, c = g.pick((1, 2)), g.size(5), g.size(5), g.size(6)
        shape = (n, h, w, c * k * k) if name == "depth_to_space" else (n, h * k, w * k, c)
        g.ops.append({"op": name, "in": shape, "block": k})
        return [getattr(b, name)(g.input(shape), k)]
    shape = g.shape(int(g.rng.integers(1, 6)), 7)
    rank = len(shape)
    if name == "strided_slice":
        begin, end, strides = [], [], []
        for d in shape:
            begin.append(int(g.rng.integers(-d, d)))
            end.append(int(g.rng.integers(-d - 1, d + 2)))
            strides.append(g.pick((1, 1, 2, 3, -1, -2)))
        masks = {k: int(g.rng.integers(0, 1 << rank)) for k in ("begin_mask", "end_mask")}
        # One index (shrink) only where it is a valid forward index.
        masks["shrink_axis_mask"] = sum(
            1 << a for a in range(rank)
            if g.chance(0.2) and strides[a] > 0 and not masks["begin_mask"] >> a & 1
            and -shape[a] <= begin[a] < shape[a])
        g.ops.append({"op": name, "in": shape, "begin": begin, "end": end, "strides": strides,
                      **masks})
        return [b.strided_slice(g.input(shape), begin, end, strides, **masks)]
    if name == "slice":
        begin = [int(g.rng.integers(0, d)) for d in shape]
        size = [g.pick((-1, int(g.rng.integers(1, d - s + 1)))) for d, s in zip(shape, begin,
                                                                                  strict=True)]
        g.ops.append({"op": name, "in": shape, "begin": begin, "size": size})
        return [b.slice(g.input(shape), begin, size)]
    axis = int(g.rng.integers(-rank, rank))
    if name == "gather":
        idx = g.rng.integers(0, shape[axis], g.shape(int(g.rng.integers(0, 3)), 4)).tolist()
        g.ops.append({"op": name, "in": shape, "axis": axis, "indices": idx})
        return [b.gather(g.input(shape), idx, axis)]
    if name == "unpack":
        g.ops.append({"op": name, "in": shape, "axis": axis})
        return b.unpack(g.input(shape), axis)
    shape = shape[:4]
    count = int(g.rng.integers(1, 5))
    axis = int(g.rng.integers(-len(shape) - 1, len(shape) + 1))
    g.ops.append({"op": name, "in": shape, "count": count, "axis": axis})
    return [b.pack([g.input(shape) for _ in range(count)], axis)]


def _step_strided_slice(g: Any, x: int, seen: list[int]) -> int | None:
    """A crop and/or subsampling of H and W (either direction), sometimes of the channels."""
    n, h, w, c = g.b.shape(x)
    begin, end, strides = [0], [n], [1]
    for d in (h, w):
        s = g.pick((1, 1, 2, -1, -2))
        lo, hi = sorted(int(v) for v in g.rng.integers(0, d + 1, 2))
        hi = max(hi, lo + 1) if lo < d else d
        lo = min(lo, d - 1)
        begin.append(hi - 1 if s < 0 else lo)
        end.append(lo - 1 if s < 0 else hi)
        strides.append(s)
    c0 = int(g.rng.integers(0, c))
    begin.append(c0)
    end.append(int(g.rng.integers(c0 + 1, c + 1)))
    strides.append(1)
    # end -1 would count from the back: a backward run down to index 0 leaves end open instead.
    end_mask = sum(1 << i for i, (e, s) in enumerate(zip(end, strides, strict=True)) if e < 0)
    g.ops.append({"op": "strided_slice", "begin": begin, "end": end, "strides": strides,
                  "end_mask": end_mask})
    return g.b.strided_slice(x, begin, end, strides, end_mask=end_mask)


def _step_slice(g: Any, x: int, seen: list[int]) -> int | None:
    n, h, w, c = g.b.shape(x)
    begin = [0, int(g.rng.integers(0, h)), int(g.rng.integers(0, w)), 0]
    size = [-1, int(g.rng.integers(1, h - begin[1] + 1)), -1, g.pick((-1, c))]
    g.ops.append({"op": "slice", "begin": begin, "size": size})
    return g.b.slice(x, begin, size)


def _step_gather(g: Any, x: int, seen: list[int]) -> int | None:
    """Channels (or rows) picked, repeated and reordered by constant indices."""
    axis = g.pick((1, 3, 3, -1))
    extent = g.b.shape(x)[axis]
    idx = [int(i) for i in g.rng.integers(0, extent, int(g.rng.integers(1, 9)))]
    g.ops.append({"op": "gather", "axis": axis, "indices": idx})
    return g.b.gather(x, idx, axis)


def _step_unpack_pack(g: Any, x: int, seen: list[int]) -> int | None:
    """UNPACK along H, W or C, a claimed op on some slices, PACK back in another order."""
    axis = g.pick((1, 2, 3))
    if g.b.shape(x)[axis] > 8:
        return None
    parts = g.b.unpack(x, axis)
    order = [int(i) for i in g.rng.permutation(len(parts))]
    parts = [g.b.relu(parts[i]) if g.chance(0.3) else parts[i] for i in order]
    g.ops.append({"op": "unpack_pack", "axis": axis, "order": order})
    return g.b.pack(parts, axis)


def _step_space_depth(g: Any, x: int, seen: list[int]) -> int | None:
    """SPACE_TO_DEPTH, a 1x1 conv, DEPTH_TO_SPACE (or one of them where the shape allows)."""
    n, h, w, c = g.b.shape(x)
    k = g.pick((2, 2, 3))
    if h % k == 0 and w % k == 0 and c * k * k <= 64:
        g.ops.append({"op": "space_to_depth", "block": k})
        y = g.b.space_to_depth(x, k)
        y = g.conv2d(y, {"kernel": (1, 1), "stride": (1, 1), "dilation": (1, 1),
                         "padding": "SAME"}, c * k * k)
        g.ops.append({"op": "depth_to_space", "block": k})
        return g.b.depth_to_space(y, k)
    if c % (k * k) == 0:
        g.ops.append({"op": "depth_to_space", "block": k})
        return g.b.depth_to_space(x, k)
    return None


def _step_sparse_conv(g: Any, x: int, seen: list[int]) -> int | None:
    """A 1x1 conv whose weights are a pruned sparse constant (DENSIFY, sometimes FLOAT16 behind
    a DEQUANTIZE: MediaPipe's pose_detection)."""
    c = g.b.shape(x)[3]
    o = g.size(8, 16)
    w = g.rng.standard_normal((o, 1, 1, c)).astype(np.float32)
    w[g.rng.random(w.shape) < 0.6] = 0.0
    fp16 = g.chance(0.5)
    g.ops.append({"op": "sparse_conv2d", "out_c": o, "fp16": fp16})
    return g.b.conv2d(x, g.b.sparse_const(w, fp16=fp16), g.b.rand((o,)), activation=g.act())


SELECT_STEPS: tuple[Callable[[Any, int, list[int]], int | None], ...] = (
    _step_strided_slice, _step_slice, _step_gather, _step_unpack_pack, _step_space_depth,
    _step_sparse_conv,
)
