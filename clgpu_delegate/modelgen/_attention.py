"""Transformer pieces as TensorFlow's converter writes them: BATCH_MATMUL, GELU, a Keras Dense
on a 3-D input (RESHAPE of shapes computed at run time around FULLY_CONNECTED), layer norm as
MEAN / SQUARED_DIFFERENCE / RSQRT / MUL / ADD, and an encoder block of them."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import tflite

from clgpu_delegate.modelgen._elementwise import ElementwiseOps
from clgpu_delegate.modelgen._graph import Operand
from clgpu_delegate.modelgen._shape import ShapeOps
from clgpu_delegate.modelgen._window import WindowOps


class AttentionOps(ElementwiseOps, ShapeOps, WindowOps):
    """BATCH_MATMUL, GELU and the converter's transformer patterns (built on the element-wise,
    shape and window op families)."""

    def batch_matmul(self, x: Operand, y: Operand, adj_x: bool = False, adj_y: bool = False) -> int:
        """BATCH_MATMUL: x[..., M, K] @ y[..., K, N] (adj_*: the operand's last two axes
        swapped), batch axes broadcast; numpy operands become constants."""
        tx, ty = self._operand(x, "lhs"), self._operand(y, "rhs")
        sx, sy = self._float_input(tx), self._float_input(ty)
        if not 2 <= len(sx) <= 5 or not 2 <= len(sy) <= 5:
            raise ValueError(f"BATCH_MATMUL operands must have rank 2 to 5: {sx}, {sy}")
        m, kx = (sx[-1], sx[-2]) if adj_x else (sx[-2], sx[-1])
        ky, n = (sy[-1], sy[-2]) if adj_y else (sy[-2], sy[-1])
        if kx != ky:
            raise ValueError(f"BATCH_MATMUL operands {sx} and {sy} disagree on K")
        batch = np.broadcast_shapes(sx[:-2], sy[:-2])
        return self._op(
            tflite.BuiltinOperator.BATCH_MATMUL,
            [tx, ty],
            [(*batch, m, n)],
            version=1,
            options="BatchMatMulOptions",
            AdjX=adj_x,
            AdjY=adj_y,
        )[0]

    def gelu(self, x: int, approximate: bool = False) -> int:
        """GELU (erf, or the tanh approximation)."""
        return self._op(
            tflite.BuiltinOperator.GELU,
            [x],
            [self._float_input(x)],
            options="GeluOptions",
            Approximate=approximate,
        )[0]

    def _unary_op(self, code: int, x: int) -> int:
        return self._op(code, [x], [self._float_input(x)])[0]

    def _int_op(self, code: int, inputs: list[int], shape: tuple[int, ...], **kw: object) -> int:
        return self._op(code, inputs, [shape], out_dtype=np.int32, **kw)[0]  # type: ignore[arg-type]

    def keras_dense(
        self,
        x: int,
        weights: npt.NDArray[np.float32],
        bias: npt.NDArray[np.float32] | None = None,
        activation: str | None = None,
        stale_rows: bool = False,
    ) -> int:
        """Keras Dense on a (batch, ..., K) input as TF's converter writes it for an unknown
        batch: RESHAPE to (prod(leading), K) through SHAPE -> GATHER -> REDUCE_PROD -> PACK,
        FULLY_CONNECTED (weights (N, K)), RESHAPE back through CONCATENATION. The flattened
        tensor is declared (1, 1), as the converter declares it from its (-1, -1) signature;
        with stale_rows the FULLY_CONNECTED's output too, (1, N) from (-1, N), as it does in
        dynamic-range models."""
        bi = tflite.BuiltinOperator
        shape = self._float_input(x)
        n, k = weights.shape
        if shape[-1] != k:
            raise ValueError(f"Dense weights {weights.shape} do not fit input {shape}")
        lead = shape[:-1]
        dims = self._int_op(
            bi.SHAPE, [x], (len(shape),), options="ShapeOptions", OutType=tflite.TensorType.INT32
        )
        head = self._int_op(
            bi.GATHER,
            [dims, self._int_const(list(range(len(lead))), "lead")],
            (len(lead),),
            options="GatherOptions",
            Axis=0,
        )
        tail = self._int_op(
            bi.GATHER,
            [dims, self._int_const([len(lead)], "last")],
            (1,),
            options="GatherOptions",
            Axis=0,
        )
        axis0 = self._int_const([0], "axis0")
        rows = self._int_op(
            bi.REDUCE_PROD, [head, axis0], (), options="ReducerOptions", KeepDims=False
        )
        cols = self._int_op(
            bi.REDUCE_PROD, [tail, axis0], (), options="ReducerOptions", KeepDims=False
        )
        flat_shape = self._int_op(
            bi.PACK, [rows, cols], (2,), options="PackOptions", ValuesCount=2, Axis=0
        )
        out_shape = self._int_op(
            bi.CONCATENATION,
            [head, self._int_const([n], "units")],
            (len(shape),),
            options="ConcatenationOptions",
            Axis=0,
        )
        flat = self._op(bi.RESHAPE, [x, flat_shape], [(1, 1)], options="ReshapeOptions")[0]
        fc = self._op(
            bi.FULLY_CONNECTED,
            [
                flat,
                self._const(weights, "kernel"),
                -1 if bias is None else self._const(bias, "bias"),
            ],
            [(1 if stale_rows else math.prod(lead), n)],
            options="FullyConnectedOptions",
            FusedActivationFunction=0,
        )[0]
        y = self._op(bi.RESHAPE, [fc, out_shape], [(*lead, n)], options="ReshapeOptions")[0]
        if activation == "gelu":
            y = self.gelu(y)
        elif activation is not None:
            raise ValueError(f"unknown Dense activation {activation!r}")
        return y

    def layer_norm(
        self,
        x: int,
        gamma: npt.NDArray[np.float32] | None = None,
        beta: npt.NDArray[np.float32] | None = None,
        eps: float = 1e-3,
        form: str = "batch_norm",
    ) -> int:
        """Layer normalization over the last axis as converters write it.

        form "batch_norm" (TF's batch_normalization, as the converter folds Keras'
        LayerNormalization): x * g + (-mean * g) with g = rsqrt(var + eps) * gamma, and with
        a beta: x * g + (beta - mean * g). form "centered": (x - mean) * g (+ beta)."""
        bi = tflite.BuiltinOperator
        shape = self._float_input(x)
        axis = self._int_const([-1], "ln_axis")
        keep = (*shape[:-1], 1)

        def mean(t: int) -> int:
            return self._op(bi.MEAN, [t, axis], [keep], options="ReducerOptions", KeepDims=True)[0]

        mu = mean(x)
        var = mean(
            self._op(bi.SQUARED_DIFFERENCE, [x, mu], [shape], options="SquaredDifferenceOptions")[0]
        )
        ve = self._op(
            bi.ADD,
            [var, self._const(np.array(eps, np.float32), "eps")],
            [keep],
            options="AddOptions",
        )[0]
        g = self._unary_op(bi.RSQRT, ve)
        if gamma is not None:
            g = self._op(
                bi.MUL,
                [g, self._const(gamma.reshape(1, 1, -1) if len(shape) == 3 else gamma, "gamma")],
                [shape],
                options="MulOptions",
            )[0]
        if form == "centered":
            d = self._op(bi.SUB, [x, mu], [shape], options="SubOptions")[0]
            y = self._op(bi.MUL, [d, g], [shape], options="MulOptions")[0]
            if beta is not None:
                y = self._op(bi.ADD, [y, self._const(beta, "beta")], [shape], options="AddOptions")[
                    0
                ]
            return y
        if form != "batch_norm":
            raise ValueError(f"unknown layer norm form {form!r}")
        gshape = self.shape(g)
        xg = self._op(bi.MUL, [x, g], [shape], options="MulOptions")[0]
        if beta is None:
            neg = self._unary_op(bi.NEG, mu)
            t = self._op(bi.MUL, [neg, g], [gshape], options="MulOptions")[0]
        else:
            mg = self._op(bi.MUL, [mu, g], [gshape], options="MulOptions")[0]
            t = self._op(bi.SUB, [self._const(beta, "beta"), mg], [gshape], options="SubOptions")[0]
        return self._op(bi.ADD, [xg, t], [shape], options="AddOptions")[0]

    def attention(
        self,
        x: int,
        heads: int,
        wq: npt.NDArray[np.float32],
        wk: npt.NDArray[np.float32],
        wv: npt.NDArray[np.float32],
        wo: npt.NDArray[np.float32],
    ) -> int:
        """Keras MultiHeadAttention(x, x) as the converter writes it (no biases): FULLY_CONNECTED
        projections, RESHAPE + TRANSPOSE to heads, BATCH_MATMUL, a scale MUL, SOFTMAX,
        BATCH_MATMUL, TRANSPOSE + RESHAPE back, the output projection."""
        b, s, d = self._float_input(x, 3)
        dh = d // heads

        def project(w: npt.NDArray[np.float32], perm: tuple[int, ...]) -> int:
            y = self._op(
                tflite.BuiltinOperator.FULLY_CONNECTED,
                [x, self._const(w, "w"), -1],
                [(b, s, d)],
                options="FullyConnectedOptions",
                KeepNumDims=True,
            )[0]
            y = self.reshape(y, (-1, s, heads, dh), resolve=False)
            return self.transpose(y, perm)

        q = project(wq, (0, 2, 1, 3))
        kt = project(wk, (0, 2, 3, 1))
        scores = self.mul(self.batch_matmul(q, kt), np.array(1.0 / math.sqrt(dh), np.float32))
        p = self.softmax(self.reshape(scores, (-1, heads, s, s), resolve=False))
        v = project(wv, (0, 2, 1, 3))
        o = self.reshape(self.batch_matmul(p, v), (-1, heads, s, dh), resolve=False)
        o = self.reshape(self.transpose(o, (0, 2, 1, 3)), (-1, s, d), resolve=False)
        return self._op(
            tflite.BuiltinOperator.FULLY_CONNECTED,
            [o, self._const(wo, "wo"), -1],
            [(b, s, d)],
            options="FullyConnectedOptions",
            KeepNumDims=True,
        )[0]

    def encoder_block(self, x: int, heads: int = 2, mlp: int = 2, beta: bool = False) -> int:
        """One Keras transformer encoder layer as TF 2.21's converter writes it: attention,
        residual, layer norm, a Dense(gelu) + Dense MLP through run-time shapes, residual,
        layer norm. Random weights; `beta`: the layer norms have a beta (else it is 0)."""
        d = self._float_input(x, 3)[2]

        def w(n: int, k: int) -> npt.NDArray[np.float32]:
            return self.rand((n, k), scale=1.0 / math.sqrt(k))

        def ln(t: int) -> int:
            gamma = (1.0 + 0.1 * self.rand((d,), scale=1.0)).astype(np.float32)
            return self.layer_norm(t, gamma, self.rand((d,), scale=0.1) if beta else None)

        a = self.attention(x, heads, w(d, d), w(d, d), w(d, d), w(d, d))
        x = ln(self.add(x, a))
        h = self.keras_dense(x, w(mlp * d, d), activation="gelu")
        return ln(self.add(x, self.keras_dense(h, w(d, mlp * d))))
