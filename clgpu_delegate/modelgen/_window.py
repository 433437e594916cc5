"""Window ops: pooling, the reductions (MEAN, SUM, REDUCE_MAX, REDUCE_MIN), SOFTMAX,
LOG_SOFTMAX and the resizes."""

from __future__ import annotations

from collections.abc import Sequence

import tflite

from clgpu_delegate.modelgen._graph import (
    _activation,
    _GraphBuilder,
    _norm_axis,
    _pair,
    _window,
)


class WindowOps(_GraphBuilder):
    """Pooling, reduction and resize op builders."""

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
        kh, kw = _pair(size, "pool size")
        oh, ow, window = _window((h, w), (kh, kw), stride, padding)
        return self._op(
            code,
            [x],
            [(n, oh, ow, c)],
            options="Pool2DOptions",
            **window,
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

    def _reduce(self, code: int, x: int, axes: Sequence[int], keep_dims: bool) -> int:
        """A reduction over `axes`; they are written as given (negative or repeated axes
        reach the runtime as they are), the output shape uses them normalized."""
        shape = self._float_input(x)
        axes_n = {_norm_axis(int(a), len(shape)) for a in axes}
        if not axes_n:
            raise ValueError("a reduction needs at least one axis")
        if keep_dims:
            out = tuple(1 if i in axes_n else d for i, d in enumerate(shape))
        else:
            out = tuple(d for i, d in enumerate(shape) if i not in axes_n)
        return self._op(
            code,
            [x, self._int_const([int(a) for a in axes], "axes")],
            [out],
            options="ReducerOptions",
            KeepDims=bool(keep_dims),
        )[0]

    def mean(self, x: int, axes: Sequence[int], keep_dims: bool = False) -> int:
        """MEAN over `axes`."""
        return self._reduce(tflite.BuiltinOperator.MEAN, x, axes, keep_dims)

    def sum(self, x: int, axes: Sequence[int], keep_dims: bool = False) -> int:
        """SUM over `axes`."""
        return self._reduce(tflite.BuiltinOperator.SUM, x, axes, keep_dims)

    def reduce_max(self, x: int, axes: Sequence[int], keep_dims: bool = False) -> int:
        """REDUCE_MAX over `axes`."""
        return self._reduce(tflite.BuiltinOperator.REDUCE_MAX, x, axes, keep_dims)

    def reduce_min(self, x: int, axes: Sequence[int], keep_dims: bool = False) -> int:
        """REDUCE_MIN over `axes`."""
        return self._reduce(tflite.BuiltinOperator.REDUCE_MIN, x, axes, keep_dims)

    def softmax(self, x: int, beta: float = 1.0) -> int:
        """SOFTMAX over the last axis."""
        return self._op(
            tflite.BuiltinOperator.SOFTMAX,
            [x],
            [self._float_input(x)],
            options="SoftmaxOptions",
            Beta=float(beta),
        )[0]

    def log_softmax(self, x: int) -> int:
        """LOG_SOFTMAX over the last axis."""
        return self._op(tflite.BuiltinOperator.LOG_SOFTMAX, [x], [self._float_input(x)])[0]

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
