"""Convolutions and FULLY_CONNECTED, with their float32 or float16 weights."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import tflite

from clgpu_delegate.modelgen._graph import (
    Operand,
    _activation,
    _GraphBuilder,
    _window,
)


class ConvOps(_GraphBuilder):
    """CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED builders."""

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
        """CONV_2D; filters OHWI, bias (O,) (zeros when None: TFLite needs a bias tensor).

        Filters of I < C input channels make a grouped convolution of C / I groups (I must
        divide C, and the groups O)."""
        n, h, w, c = self._float_input(x, 4)
        f = self._weights(filters, 4, fp16_weights, "filters")
        o, kh, kw, i = self.shape(f)
        if i < 1 or c % i or o % (c // i):
            raise ValueError(f"filters {self.shape(f)} do not split {c} input channels into groups")
        oh, ow, window = _window((h, w), (kh, kw), stride, padding, dilation)
        # TFLite's float conv kernels require the bias input, so a missing bias becomes zeros.
        bias = np.zeros(o, np.float32) if bias is None else bias
        inputs = [x, f, self._bias(bias, o, fp16_weights)]
        return self._op(
            tflite.BuiltinOperator.CONV_2D,
            inputs,
            [(n, oh, ow, o)],
            options="Conv2DOptions",
            **window,
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
        oh, ow, window = _window((h, w), (kh, kw), stride, padding, dilation)
        bias = np.zeros(cm, np.float32) if bias is None else bias
        inputs = [x, f, self._bias(bias, cm, fp16_weights)]
        dilated = (window["DilationHFactor"], window["DilationWFactor"]) != (1, 1)
        return self._op(
            tflite.BuiltinOperator.DEPTHWISE_CONV_2D,
            inputs,
            [(n, oh, ow, cm)],
            version=2 if dilated else 1,
            options="DepthwiseConv2DOptions",
            **window,
            DepthMultiplier=depth_multiplier,
            FusedActivationFunction=_activation(activation),
        )[0]

    def transpose_conv(
        self,
        x: int,
        filters: Operand,
        output_hw: Sequence[int],
        stride: int | Sequence[int] = 2,
        padding: str = "SAME",
        bias: Operand | None = None,
        activation: str | None = None,
        dynamic_batch: bool = False,
    ) -> int:
        """TRANSPOSE_CONV; filters (OC, KH, KW, IC). dynamic_batch: the output shape is built at
        run time from SHAPE(x) -> STRIDED_SLICE -> PACK, as TF's converter does for Keras'
        Conv2DTranspose with an unknown batch."""
        n, _, _, c = self._float_input(x, 4)
        f = self._operand(filters, "filters")
        oc, _, _, ic = self.shape(f)
        if ic != c:
            raise ValueError(f"transpose conv filters {self.shape(f)} do not fit {c} channels")
        sh, sw = (stride, stride) if isinstance(stride, int) else tuple(stride)
        oh, ow = (int(v) for v in output_hw)
        bi = tflite.BuiltinOperator
        if dynamic_batch:
            dims = self._op(
                bi.SHAPE,
                [x],
                [(4,)],
                options="ShapeOptions",
                out_dtype=np.int32,
                OutType=tflite.TensorType.INT32,
            )[0]
            ends = [self._int_const([k], f"slice{k}") for k in (0, 1, 1)]
            batch = self._op(
                bi.STRIDED_SLICE,
                [dims, *ends],
                [()],
                options="StridedSliceOptions",
                out_dtype=np.int32,
                ShrinkAxisMask=1,
            )[0]
            rest = [self._int_const(v, "dim") for v in (oh, ow, oc)]
            shape = self._op(
                bi.PACK,
                [batch, *rest],
                [(4,)],
                options="PackOptions",
                out_dtype=np.int32,
                ValuesCount=4,
                Axis=0,
            )[0]
        else:
            shape = self._int_const([n, oh, ow, oc], "output_shape")
        inputs = [shape, f, x]
        if bias is not None:
            inputs.append(self._operand(bias, "bias"))
        return self._op(
            bi.TRANSPOSE_CONV,
            inputs,
            [(n, oh, ow, oc)],
            version=4,
            options="TransposeConvOptions",
            Padding=getattr(tflite.Padding, padding),
            StrideH=sh,
            StrideW=sw,
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
