"""Element-wise ops: ADD, MUL, SUB and the unary activations."""

from __future__ import annotations

import numpy as np
import tflite

from clgpu_delegate.modelgen._graph import (
    Operand,
    _activation,
    _GraphBuilder,
)


class ElementwiseOps(_GraphBuilder):
    """Element-wise op builders."""

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
