"""Element-wise ops: the binary ops with broadcasting, the unary activations, comparisons,
SELECT_V2 and CAST."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tflite

from clgpu_delegate.modelgen._graph import (
    _OP_NAMES,
    Operand,
    _activation,
    _GraphBuilder,
)
from clgpu_delegate.modelgen.flatbuffer import _TYPES


class ElementwiseOps(_GraphBuilder):
    """Element-wise op builders."""

    def _binary(
        self,
        code: int,
        options: str | None,
        a: Operand,
        b2: Operand,
        activation: str | None,
        *,
        fused: bool = True,
    ) -> int:
        ta, tb = self._operand(a, "lhs"), self._operand(b2, "rhs")
        if self.dtype(ta) != self.dtype(tb):
            raise ValueError(f"operand types differ: {self.dtype(ta)} vs {self.dtype(tb)}")
        try:
            out = np.broadcast_shapes(self.shape(ta), self.shape(tb))
        except ValueError as e:
            raise ValueError(f"cannot broadcast {self.shape(ta)} with {self.shape(tb)}") from e
        if not fused and activation is not None:
            raise ValueError(f"{_OP_NAMES[code]} has no fused activation")
        fields = {"FusedActivationFunction": _activation(activation)} if fused else {}
        return self._op(code, [ta, tb], [out], options=options, out_dtype=self.dtype(ta), **fields)[
            0
        ]

    def add(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """ADD with numpy broadcasting; numpy operands become constants."""
        return self._binary(tflite.BuiltinOperator.ADD, "AddOptions", a, b2, activation)

    def mul(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """MUL with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.MUL, "MulOptions", a, b2, activation)

    def sub(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """SUB with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.SUB, "SubOptions", a, b2, activation)

    def div(self, a: Operand, b2: Operand, activation: str | None = None) -> int:
        """DIV with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.DIV, "DivOptions", a, b2, activation)

    def maximum(self, a: Operand, b2: Operand) -> int:
        """MAXIMUM with numpy broadcasting."""
        code = tflite.BuiltinOperator.MAXIMUM
        return self._binary(code, "MaximumMinimumOptions", a, b2, None, fused=False)

    def minimum(self, a: Operand, b2: Operand) -> int:
        """MINIMUM with numpy broadcasting."""
        code = tflite.BuiltinOperator.MINIMUM
        return self._binary(code, "MaximumMinimumOptions", a, b2, None, fused=False)

    def squared_difference(self, a: Operand, b2: Operand) -> int:
        """SQUARED_DIFFERENCE, (a - b)^2, with numpy broadcasting."""
        code = tflite.BuiltinOperator.SQUARED_DIFFERENCE
        return self._binary(code, "SquaredDifferenceOptions", a, b2, None, fused=False)

    def pow(self, a: Operand, b2: Operand) -> int:
        """POW with numpy broadcasting."""
        return self._binary(tflite.BuiltinOperator.POW, "PowOptions", a, b2, None, fused=False)

    def prelu(self, x: Operand, alpha: Operand) -> int:
        """PRELU: x where x >= 0, else alpha * x (alpha broadcasts, e.g. per channel)."""
        return self._binary(tflite.BuiltinOperator.PRELU, None, x, alpha, None, fused=False)

    def _unary(self, code: int, x: int, options: str | None = None) -> int:
        return self._op(code, [x], [self._float_input(x)], options=options)[0]

    def relu(self, x: int) -> int:
        """RELU."""
        return self._unary(tflite.BuiltinOperator.RELU, x)

    def relu6(self, x: int) -> int:
        """RELU6."""
        return self._unary(tflite.BuiltinOperator.RELU6, x)

    def neg(self, x: int) -> int:
        """NEG."""
        return self._unary(tflite.BuiltinOperator.NEG, x)

    def tanh(self, x: int) -> int:
        """TANH."""
        return self._unary(tflite.BuiltinOperator.TANH, x)

    def logistic(self, x: int) -> int:
        """LOGISTIC (sigmoid)."""
        return self._unary(tflite.BuiltinOperator.LOGISTIC, x)

    def l2_normalization(self, x: int, activation: str | None = None) -> int:
        """L2_NORMALIZATION over the last axis: x / max(sqrt(sum x^2), 1e-6). TFLite's kernel
        takes no fused activation; `activation` writes one anyway (for hostile models)."""
        return self._op(
            tflite.BuiltinOperator.L2_NORMALIZATION,
            [x],
            [self._float_input(x)],
            options="L2NormOptions",
            FusedActivationFunction=_activation(activation),
        )[0]

    def hard_swish(self, x: int) -> int:
        """HARD_SWISH."""
        return self._unary(tflite.BuiltinOperator.HARD_SWISH, x, "HardSwishOptions")

    def _compare(self, code: int, options: str, a: Operand, b2: Operand) -> int:
        ta, tb = self._operand(a, "lhs"), self._operand(b2, "rhs")
        out = np.broadcast_shapes(self.shape(ta), self.shape(tb))
        return self._op(code, [ta, tb], [out], options=options, out_dtype=np.dtype(bool))[0]

    def equal(self, a: Operand, b2: Operand) -> int:
        """EQUAL with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.EQUAL, "EqualOptions", a, b2)

    def not_equal(self, a: Operand, b2: Operand) -> int:
        """NOT_EQUAL with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.NOT_EQUAL, "NotEqualOptions", a, b2)

    def less(self, a: Operand, b2: Operand) -> int:
        """LESS with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.LESS, "LessOptions", a, b2)

    def less_equal(self, a: Operand, b2: Operand) -> int:
        """LESS_EQUAL with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.LESS_EQUAL, "LessEqualOptions", a, b2)

    def greater(self, a: Operand, b2: Operand) -> int:
        """GREATER with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.GREATER, "GreaterOptions", a, b2)

    def greater_equal(self, a: Operand, b2: Operand) -> int:
        """GREATER_EQUAL with numpy broadcasting: a bool tensor."""
        return self._compare(tflite.BuiltinOperator.GREATER_EQUAL, "GreaterEqualOptions", a, b2)

    def logical_and(self, a: int, b2: int) -> int:
        """LOGICAL_AND of two bool tensors, broadcasting."""
        return self._compare(tflite.BuiltinOperator.LOGICAL_AND, "LogicalAndOptions", a, b2)

    def logical_or(self, a: int, b2: int) -> int:
        """LOGICAL_OR of two bool tensors, broadcasting."""
        return self._compare(tflite.BuiltinOperator.LOGICAL_OR, "LogicalOrOptions", a, b2)

    def logical_not(self, x: int) -> int:
        """LOGICAL_NOT of a bool tensor."""
        code = tflite.BuiltinOperator.LOGICAL_NOT
        return self._op(
            code, [x], [self.shape(x)], options="LogicalNotOptions", out_dtype=np.dtype(bool)
        )[0]

    def select(self, cond: int, a: int, b2: int) -> int:
        """SELECT (v1): operands of one shape."""
        code = tflite.BuiltinOperator.SELECT
        return self._op(
            code, [cond, a, b2], [self.shape(a)], options="SelectOptions", out_dtype=self.dtype(a)
        )[0]

    def rfft2d(self, x: int, fft_length: Sequence[int]) -> int:
        """RFFT2D over the last two axes of float `x`: complex64 [..., fft_length[0],
        fft_length[1] // 2 + 1] (each axis cropped or zero-padded to its length first)."""
        shape = (*self.shape(x)[:-2], int(fft_length[0]), int(fft_length[1]) // 2 + 1)
        n = self.const(np.asarray(fft_length, np.int32))
        code = tflite.BuiltinOperator.RFFT2D
        return self._op(
            code, [x, n], [shape], options="Rfft2dOptions", out_dtype=np.dtype(np.complex64)
        )[0]

    def _complex_part(self, code: int, x: int) -> int:
        return self._op(code, [x], [self.shape(x)])[0]

    def real(self, x: int) -> int:
        """REAL of a complex64 tensor."""
        return self._complex_part(tflite.BuiltinOperator.REAL, x)

    def imag(self, x: int) -> int:
        """IMAG of a complex64 tensor."""
        return self._complex_part(tflite.BuiltinOperator.IMAG, x)

    def complex_abs(self, x: int) -> int:
        """COMPLEX_ABS: the magnitudes of a complex64 tensor."""
        return self._complex_part(tflite.BuiltinOperator.COMPLEX_ABS, x)

    def reverse_v2(self, x: int, axes: Sequence[int]) -> int:
        """REVERSE_V2 along `axes` (a constant)."""
        ax = self.const(np.asarray(axes, np.int32))
        code = tflite.BuiltinOperator.REVERSE_V2
        return self._op(
            code, [x, ax], [self.shape(x)], options="ReverseV2Options", out_dtype=self.dtype(x)
        )[0]

    def select_v2(self, cond: Operand, a: Operand, b2: Operand) -> int:
        """SELECT_V2 (numpy's where, broadcasting all three)."""
        tc, ta, tb = (self._operand(v, w) for v, w in ((cond, "cond"), (a, "x"), (b2, "y")))
        out = np.broadcast_shapes(self.shape(tc), self.shape(ta), self.shape(tb))
        code = tflite.BuiltinOperator.SELECT_V2
        return self._op(
            code, [tc, ta, tb], [out], options="SelectV2Options", out_dtype=self.dtype(ta)
        )[0]

    def cast(self, x: int, dtype: str = "float32") -> int:
        """CAST of tensor `x` to `dtype` (float32, int32, int64, bool, ...): numpy's astype,
        as TFLite's CPU kernel converts."""
        out = np.dtype(dtype)
        if out not in _TYPES:
            raise ValueError(f"CAST target must be one of {sorted(str(t) for t in _TYPES)}")
        return self._op(
            tflite.BuiltinOperator.CAST,
            [x],
            [self.shape(x)],
            options="CastOptions",
            out_dtype=out.type,
            InDataType=_TYPES[np.dtype(self.dtype(x))],
            OutDataType=_TYPES[out],
        )[0]
