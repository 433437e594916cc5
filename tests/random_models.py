"""A seeded generator of small random TFLite graphs over every op the delegate claims.

    case = generate(seed)          # the same seed always gives the same model
    case.model                     # flatbuffer bytes
    case.describe()                # the kind and every op's parameters, for a bug report

Kinds: one claimed op with random parameters (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD,
TRANSPOSE, BATCH_MATMUL; weights sometimes FLOAT16 behind DEQUANTIZE, FC weights sometimes an
input; a data-movement op: STRIDED_SLICE, SLICE, GATHER, PACK, UNPACK, DEPTH_TO_SPACE,
SPACE_TO_DEPTH), or a small graph mixing claimed ops (also pooling, CONCATENATION, MEAN, the
data-movement ops, sparse conv weights behind DENSIFY, BATCH_MATMUL, layer norms, Keras Dense
layers and squeeze-and-excitation blocks as converters write them) with ops the delegate leaves
on the CPU (MUL, PAD, ...). Claimed ops only get variants the delegate supports, so every one of
them must be delegated (`expected_delegated` derives that from the model itself).

Reproduce one case by hand:  python tests/random_models.py SEED [--save model.tflite]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tflite
from parity import CONV_ALGORITHMS, cpu_op
from random_select import SELECT_STEPS, select_case

from clgpu_delegate.modelgen import ModelBuilder

# The fused activations the delegate implements (TANH / SIGN_BIT stay on the CPU).
ACTIVATIONS = (None, "RELU", "RELU6", "RELU_N1_TO_1")
# Convolutions also take TANH and SIGN_BIT, which TFLite's float conv kernels ignore.
CONV_ACTIVATIONS = (*ACTIVATIONS, "TANH", "SIGN_BIT")
# The forced algorithms (the selector's own picks are covered elsewhere).
FORCED_CONV_ALGORITHMS = tuple(CONV_ALGORITHMS[1:])
CLAIMED_OPS = (
    "RELU",
    "RELU6",
    "TANH",
    "LOGISTIC",
    "HARD_SWISH",
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "MAXIMUM",
    "PRELU",
    "TRANSPOSE",
    "CONCATENATION",
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "RESHAPE",
    "MEAN",
    "PAD",
    "STRIDED_SLICE",
    "SLICE",
    "GATHER",
    "PACK",
    "UNPACK",
    "DEPTH_TO_SPACE",
    "SPACE_TO_DEPTH",
    "BATCH_MATMUL",
    "GELU",
    "SOFTMAX",
    "SQUARED_DIFFERENCE",
    "RSQRT",
    "NEG",
)
# Folded at Prepare, claimed with their readers: a DEQUANTIZE of a FLOAT16 constant, a DENSIFY,
# and the integer shape computations (SHAPE -> GATHER / REDUCE_PROD / PACK -> a RESHAPE's shape).
FOLDED_OPS = ("DEQUANTIZE", "DENSIFY", "SHAPE", "GATHER", "REDUCE_PROD", "PACK")
MAX_ELEMENTS = 6000  # per tensor: keeps a case well under 100 ms on a 2-core PoCL

_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


@dataclass
class RandomCase:
    seed: int
    kind: str
    model: bytes
    ops: list[dict[str, Any]]  # the generator's calls, in order, with their parameters
    conv_algorithm: str = "auto"  # delegate options this case runs with
    zero_copy: str = "auto"
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"seed={self.seed} kind={self.kind} conv_algorithm={self.conv_algorithm} "
                 f"zero_copy={self.zero_copy}"]
        lines += [f"  {i}: " + ", ".join(f"{k}={v}" for k, v in op.items())
                  for i, op in enumerate(self.ops)]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def model_ops(model: bytes) -> list[tuple[str, list[int], list[int]]]:
    """(op name, inputs, outputs) per node of subgraph 0, in node order."""
    m = tflite.Model.GetRootAsModel(model, 0)
    g = m.Subgraphs(0)
    out = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        out.append((_OP_NAMES[builtin], list(op.InputsAsNumpy()), list(op.OutputsAsNumpy())))
    return out


def expected_delegated(model: bytes) -> set[int]:
    """Nodes the delegate must claim: every claimed op (the generator makes only supported
    variants), and a DEQUANTIZE or DENSIFY when every consumer of its output is claimed (last
    first: a DENSIFY -> DEQUANTIZE chain follows its end)."""
    ops = model_ops(model)
    claimed = {i for i, (name, _, _) in enumerate(ops) if name in CLAIMED_OPS}
    for i, (name, _, outs) in reversed(list(enumerate(ops))):
        if name not in FOLDED_OPS:
            continue
        consumers = [j for j, (_, ins, _) in enumerate(ops) if outs[0] in ins]
        if consumers and all(j in claimed for j in consumers):
            claimed.add(i)
    return claimed


class _Gen:
    """One case being generated: the rng, the builder and the log of op parameters."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.b = ModelBuilder(seed=seed)
        self.ops: list[dict[str, Any]] = []
        self.inputs = 0
        self.input_ids: list[int] = []

    # ---- random helpers ------------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options: Any) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def size(self, small: int, large: int = 0, p_large: float = 0.15) -> int:
        """1..small mostly, sometimes up to `large` (odd widths, vector tails)."""
        if large and self.chance(p_large):
            return int(self.rng.integers(small + 1, large + 1))
        return int(self.rng.integers(1, small + 1))

    def act(self) -> str | None:
        return self.pick(ACTIVATIONS)

    def input(self, shape: tuple[int, ...]) -> int:
        self.inputs += 1
        self.ops.append({"op": "input", "shape": shape})
        t = self.b.input(f"x{self.inputs}", shape)
        self.input_ids.append(t)
        return t

    def fp16(self) -> bool:
        return self.chance(0.25)

    def window(self, size_hint: int | None = None) -> dict[str, Any]:
        """Kernel, stride, dilation and padding along both axes, plus input H, W that fit."""
        k = (self.pick((1, 1, 2, 3, 3, 3, 4, 5)), self.pick((1, 1, 2, 3, 3, 3, 4, 5)))
        s = (self.pick((1, 1, 1, 2, 2, 3)), self.pick((1, 1, 1, 2, 2, 3)))
        d = (1, 1) if self.chance(0.6) else (self.pick((1, 2, 3)), self.pick((1, 2, 3)))
        padding = self.pick(("SAME", "VALID"))
        hw = []
        for kk, dd in zip(k, d, strict=True):
            eff = (kk - 1) * dd + 1
            lo = eff if padding == "VALID" else 1
            hw.append(int(self.rng.integers(lo, lo + (size_hint or 10))))
        return {"kernel": k, "stride": s, "dilation": d, "padding": padding, "hw": tuple(hw)}

    # ---- claimed ops on a given input ----------------------------------------------------------

    def conv2d(self, x: int, w: dict[str, Any], out_c: int) -> int:
        b = self.b
        c = b.shape(x)[3]
        bias = b.rand((out_c,)) if self.chance(0.7) else None
        p = {"op": "conv2d", "in": b.shape(x), "out_c": out_c, "kernel": w["kernel"],
             "stride": w["stride"], "dilation": w["dilation"], "padding": w["padding"],
             "activation": self.pick(CONV_ACTIVATIONS), "bias": bias is not None,
             "fp16_weights": self.fp16()}
        self.ops.append(p)
        return b.conv2d(x, b.rand((out_c, *w["kernel"], c)), bias, stride=w["stride"],
                        dilation=w["dilation"], padding=w["padding"], activation=p["activation"],
                        fp16_weights=p["fp16_weights"])

    def depthwise(self, x: int, w: dict[str, Any], multiplier: int) -> int:
        b = self.b
        c = b.shape(x)[3]
        kh, kw = w["kernel"]
        bias = b.rand((c * multiplier,)) if self.chance(0.7) else None
        p = {"op": "depthwise_conv2d", "in": b.shape(x), "multiplier": multiplier,
             "kernel": w["kernel"], "stride": w["stride"], "dilation": w["dilation"],
             "padding": w["padding"], "activation": self.pick(CONV_ACTIVATIONS),
             "bias": bias is not None, "fp16_weights": self.fp16()}
        self.ops.append(p)
        return b.depthwise_conv2d(
            x, b.rand((1, kh, kw, c * multiplier), scale=math.sqrt(2 / (kh * kw))), bias,
            stride=w["stride"], dilation=w["dilation"], padding=w["padding"],
            depth_multiplier=multiplier, activation=p["activation"],
            fp16_weights=p["fp16_weights"])

    def fully_connected(self, x: int, n_out: int, keep_num_dims: bool) -> int:
        b = self.b
        shape = b.shape(x)
        k = shape[-1] if keep_num_dims else self.fc_k(shape)
        bias = b.rand((n_out,)) if self.chance(0.6) else None
        runtime_weights = self.chance(0.2)
        p = {"op": "fully_connected", "in": shape, "k": k, "n_out": n_out,
             "keep_num_dims": keep_num_dims, "activation": self.act(), "bias": bias is not None,
             "fp16_weights": not runtime_weights and self.fp16(),
             "runtime_weights": runtime_weights}
        self.ops.append(p)
        w = self.input((n_out, k)) if runtime_weights else b.rand((n_out, k))
        return b.fully_connected(x, w, bias, activation=p["activation"],
                                 keep_num_dims=keep_num_dims, fp16_weights=p["fp16_weights"])

    def fc_k(self, shape: tuple[int, ...]) -> int:
        """K for a flattening FC: the last dim, or another divisor of the element count."""
        size = math.prod(shape)
        divisors = [d for d in range(1, min(size, 64) + 1) if size % d == 0]
        return shape[-1] if self.chance(0.5) else self.pick(divisors)

    def add_operand(self, shape: tuple[int, ...], what: str) -> tuple[int, str]:
        """An ADD operand of `shape`: a graph input, a float32 constant or an fp16 constant."""
        kind = self.pick(("input", "input", "const", "const", "fp16_const"))
        if kind == "input":
            return self.input(shape), kind
        self.ops.append({"op": f"add_{what}", "kind": kind, "shape": shape})
        return self.constant(self.rng.standard_normal(shape).astype(np.float32),
                             kind == "fp16_const"), kind

    def constant(self, value: np.ndarray, fp16: bool) -> int:
        if not fp16:
            return self.b.const(value)
        # A FLOAT16 constant + DEQUANTIZE: the builder's fp16-weight path, which its ADD lacks.
        return self.b._weights(value, value.ndim, True, "addend")

    def add(self, a: int, c: int) -> int:
        act = self.act()
        self.ops.append({"op": "add", "a": self.b.shape(a), "b": self.b.shape(c),
                         "activation": act})
        return self.b.add(a, c, act)

    def transpose(self, x: int, perm: tuple[int, ...] | None = None) -> int:
        rank = len(self.b.shape(x))
        perm = tuple(int(p) for p in self.rng.permutation(rank)) if perm is None else perm
        self.ops.append({"op": "transpose", "in": self.b.shape(x), "perm": perm})
        return self.b.transpose(x, perm)

    # ---- shapes ----------------------------------------------------------------------------------

    def shape(self, rank: int, max_dim: int = 6, budget: int = MAX_ELEMENTS) -> tuple[int, ...]:
        dims = [int(self.rng.integers(1, max_dim + 1)) for _ in range(rank)]
        while math.prod(dims) > budget:
            i = int(np.argmax(dims))
            dims[i] = max(1, dims[i] // 2)
        return tuple(dims)

    def broadcast_pair(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Two shapes that broadcast: ranks 0-6, dims dropped to 1 or left out at random."""
        out = self.shape(int(self.rng.integers(1, 7)))
        shapes = []
        for _ in range(2):
            pattern = self.pick(("same", "same", "ones", "lower", "lower_ones", "scalar"))
            s = list(out)
            if pattern in ("lower", "lower_ones"):
                s = s[int(self.rng.integers(0, len(s) + 1)):]
            if pattern in ("ones", "lower_ones"):
                s = [1 if self.chance(0.5) else d for d in s]
            if pattern == "scalar":
                s = [] if self.chance(0.5) else [1] * int(self.rng.integers(1, len(out) + 1))
            shapes.append(tuple(s))
        return shapes[0], shapes[1]


# ---- single-op cases ---------------------------------------------------------------------------


def _conv2d(g: _Gen) -> int:
    w = g.window()
    n = g.pick((1, 1, 1, 2, 3))
    c, o = g.size(8, 40), g.size(8, 40)
    return g.conv2d(g.input(_fit((n, *w["hw"], c))), w, o)


def _depthwise(g: _Gen) -> int:
    w = g.window()
    n = g.pick((1, 1, 2))
    c, m = g.size(8, 24), g.pick((1, 1, 1, 2, 3, 4))
    return g.depthwise(g.input(_fit((n, *w["hw"], c))), w, m)


def _fully_connected(g: _Gen) -> int:
    keep = g.chance(0.5)
    k = g.size(16, 64)
    lead = g.shape(int(g.rng.integers(0, 4)), 5, budget=max(1, MAX_ELEMENTS // k))
    x = g.input((*lead, k))
    if not keep and g.chance(0.3):
        # The same elements in another shape: the op flattens to (size / K, K) itself.
        size = math.prod((*lead, k))
        x = g.input(_factor(size, int(g.rng.integers(1, 5)), g.rng))
    return g.fully_connected(x, g.size(16, 48), keep)


def _add(g: _Gen) -> int:
    sa, sb = g.broadcast_pair()
    (a, ka), (c, kc) = g.add_operand(sa, "lhs"), g.add_operand(sb, "rhs")
    if ka != "input" and kc != "input":
        # Constant + constant is legal; keep a run-time input in the model all the same.
        c = g.input(sb)
    return g.add(a, c)


def _transpose(g: _Gen) -> int:
    rank = int(g.rng.integers(1, 7))
    return g.transpose(g.input(g.shape(rank, 7)))


def _batch_matmul(g: _Gen) -> int:
    """BATCH_MATMUL of ranks 2-5 with broadcast batch axes, adj flags, and sometimes a constant
    (float32 or fp16) operand."""
    m, k, n = g.size(9, 40), g.size(9, 40), g.size(9, 40)
    out_batch = g.shape(int(g.rng.integers(0, 4)), 4, budget=max(1, MAX_ELEMENTS // (m * n)))

    def batch() -> tuple[int, ...]:
        dims = out_batch[int(g.rng.integers(0, len(out_batch) + 1)):]
        return tuple(1 if g.chance(0.3) else d for d in dims)

    adj_x, adj_y = g.chance(0.3), g.chance(0.4)
    sx = (*batch(), *((k, m) if adj_x else (m, k)))
    sy = (*batch(), *((n, k) if adj_y else (k, n)))
    x = g.input(sx)
    kind = g.pick(("input", "input", "const", "fp16_const"))
    g.ops.append({"op": "batch_matmul", "x": sx, "y": sy, "adj_x": adj_x, "adj_y": adj_y,
                  "y_kind": kind})
    y = (g.input(sy) if kind == "input" else
         g.constant(g.rng.standard_normal(sy).astype(np.float32), kind == "fp16_const"))
    return g.b.batch_matmul(x, y, adj_x, adj_y)


# ---- multi-op graphs ---------------------------------------------------------------------------


def _graph(g: _Gen) -> list[int]:
    """2-7 steps, claimed and CPU ops mixed, on an NHWC activation; branches join by ADD and
    CONCATENATION, an intermediate is sometimes a graph output too."""
    x = g.input((g.pick((1, 1, 2)), g.size(10, 14), g.size(10, 14), g.size(6, 16)))
    seen = [x]
    extra_outputs: list[int] = []
    for _ in range(int(g.rng.integers(2, 8))):
        step = g.pick(GRAPH_STEPS)
        y = step(g, x, seen)
        if y is None:
            continue
        if g.chance(0.12) and x not in g.input_ids and x not in extra_outputs:
            extra_outputs.append(x)  # an intermediate read by the next op and by the user
        x = y
        seen.append(x)
    claimed = ("conv2d", "depthwise_conv2d", "fully_connected", "add", "transpose",
               "batch_matmul_step", "layer_norm", "keras_dense")
    if x in g.input_ids or not any(op["op"] in claimed for op in g.ops):
        x = _step_conv(g, x, seen)
    return [*extra_outputs, x]


def _nhwc(g: _Gen, x: int) -> tuple[int, int, int, int]:
    return g.b.shape(x)  # type: ignore[return-value]


def _step_conv(g: _Gen, x: int, seen: list[int]) -> int | None:
    n, h, w, c = _nhwc(g, x)
    win = g.window()
    if win["padding"] == "VALID" and any(
            (k - 1) * d + 1 > s for k, d, s in zip(win["kernel"], win["dilation"], (h, w),
                                                   strict=True)):
        win["padding"] = "SAME"
    return g.conv2d(x, win, g.size(8, 24))


def _step_depthwise(g: _Gen, x: int, seen: list[int]) -> int | None:
    n, h, w, c = _nhwc(g, x)
    win = g.window()
    if win["padding"] == "VALID" and any(
            (k - 1) * d + 1 > s for k, d, s in zip(win["kernel"], win["dilation"], (h, w),
                                                   strict=True)):
        win["padding"] = "SAME"
    m = g.pick((1, 1, 2)) if c * 2 <= 32 else 1
    return g.depthwise(x, win, m)


def _step_fc(g: _Gen, x: int, seen: list[int]) -> int | None:
    return g.fully_connected(x, g.size(12, 24), keep_num_dims=True)


def _step_add_const(g: _Gen, x: int, seen: list[int]) -> int | None:
    shape = g.b.shape(x)
    pattern = g.pick(("channel", "full", "scalar", "spatial"))
    const_shape = {"channel": shape[-1:], "full": shape, "scalar": (),
                   "spatial": (1, shape[1], shape[2], 1)}[pattern]
    value = g.rng.standard_normal(const_shape).astype(np.float32)
    fp16 = g.fp16()
    g.ops.append({"op": "add_const", "shape": const_shape, "fp16": fp16,
                  "swapped": (swapped := g.chance(0.3))})
    c = g.constant(value, fp16)
    return g.add(c, x) if swapped else g.add(x, c)


def _step_add_branch(g: _Gen, x: int, seen: list[int]) -> int | None:
    """x + an earlier tensor of the same shape, or + a second graph input that broadcasts."""
    same = [t for t in seen[:-1] if g.b.shape(t) == g.b.shape(x)]
    if same and g.chance(0.6):
        return g.add(x, g.pick(same))
    n, h, w, c = _nhwc(g, x)
    other = g.input(g.pick(((1, h, w, c), (n, 1, 1, c), (1, 1, w, 1), (c,), (n, h, w, c))))
    return g.add(other, x) if g.chance(0.5) else g.add(x, other)


def _step_transpose(g: _Gen, x: int, seen: list[int]) -> int | None:
    return g.transpose(x)


def _step_transpose_roundtrip(g: _Gen, x: int, seen: list[int]) -> int | None:
    """NHWC -> NCHW -> (an elementwise op) -> NHWC, as converted PyTorch models do."""
    y = g.transpose(x, (0, 3, 1, 2))
    y = _step_elementwise(g, y, seen)
    return g.transpose(y, (0, 2, 3, 1))


def _step_elementwise(g: _Gen, x: int, seen: list[int]) -> int:
    b = g.b
    name = g.pick(("mul", "relu", "relu6", "tanh", "logistic", "sub", "hard_swish", "prelu",
                   "maximum", "div", "swish"))
    g.ops.append({"op": name})
    channel = g.rng.standard_normal(b.shape(x)[-1:]).astype(np.float32)
    if name == "mul":
        return b.mul(x, float(g.rng.uniform(0.25, 2.0)))
    if name == "sub":
        return b.sub(x, channel)
    if name == "prelu":
        return b.prelu(x, channel * np.float32(0.3))
    if name == "maximum":
        return b.maximum(x, channel)
    if name == "div":
        return b.div(x, np.abs(channel) + np.float32(0.5))
    if name == "swish":  # folds into a conv before it (AttachEpilogue)
        return b.mul(x, b.logistic(x))
    return getattr(b, name)(x)


def _step_pool(g: _Gen, x: int, seen: list[int]) -> int | None:
    n, h, w, c = _nhwc(g, x)
    size = g.pick((1, 2, 3))
    stride = g.pick((1, 2))
    padding = "VALID" if h >= size and w >= size and g.chance(0.5) else "SAME"
    kind = g.pick(("max_pool2d", "avg_pool2d"))
    g.ops.append({"op": kind, "size": size, "stride": stride, "padding": padding})
    return getattr(g.b, kind)(x, size, stride, padding)


def _step_concat(g: _Gen, x: int, seen: list[int]) -> int | None:
    n, h, w, c = _nhwc(g, x)
    partners = [t for t in seen if len(g.b.shape(t)) == 4 and g.b.shape(t)[:3] == (n, h, w)]
    other = g.pick(partners)  # x itself is always a partner
    if c + g.b.shape(other)[3] > 48:
        return None
    g.ops.append({"op": "concat", "axis": 3, "with": g.b.shape(other)})
    return g.b.concat([x, other] if g.chance(0.5) else [other, x], axis=3)


def _step_pad(g: _Gen, x: int, seen: list[int]) -> int | None:
    pads = [[0, 0], [int(g.rng.integers(0, 2)), int(g.rng.integers(0, 2))],
            [int(g.rng.integers(0, 2)), int(g.rng.integers(0, 2))], [0, 0]]
    g.ops.append({"op": "pad", "paddings": pads})
    return g.b.pad(x, pads)


def _step_mean(g: _Gen, x: int, seen: list[int]) -> int | None:
    g.ops.append({"op": "mean", "axes": (1, 2), "keep_dims": True})
    return g.b.mean(x, (1, 2), keep_dims=True)


def _step_reshape(g: _Gen, x: int, seen: list[int]) -> int | None:
    n, h, w, c = _nhwc(g, x)
    target = g.pick(((n, w, h, c), (n, h * w, 1, c), (n, 1, h * w, c), (n, h, w * c, 1)))
    g.ops.append({"op": "reshape", "to": target})
    return g.b.reshape(x, target)


def _step_shared_fp16_weight(g: _Gen, x: int, seen: list[int]) -> int | None:
    """One FLOAT16 constant behind one DEQUANTIZE, read by a claimed ADD and a CPU op: the
    DEQUANTIZE must stay on the CPU (the CPU op needs its output)."""
    c = g.b.shape(x)[-1]
    dq = g.constant(g.rng.standard_normal((c,)).astype(np.float32), fp16=True)
    g.ops.append({"op": "shared_fp16_weight", "c": c})
    y = g.add(x, dq)
    return g.b.mul(y, cpu_op(g.b, dq))


def _step_batch_matmul(g: _Gen, x: int, seen: list[int]) -> int | None:
    """x @ a constant over channels, x @ x^T over widths (adj_y), or x^T @ x over channels
    through a TRANSPOSE the matmul reads as a view."""
    b = g.b
    n, h, w, c = _nhwc(g, x)
    kind = g.pick(("const", "self_adj", "transposed"))
    g.ops.append({"op": "batch_matmul_step", "kind": kind})
    if kind == "const":
        return b.batch_matmul(x, b.rand((c, g.size(8, 16)), scale=c**-0.5))
    if kind == "self_adj" and n * h * w * w <= MAX_ELEMENTS:
        return b.batch_matmul(x, x, adj_y=True)
    if n * h * c * c > MAX_ELEMENTS:
        return None
    return b.batch_matmul(b.transpose(x, (0, 1, 3, 2)), x)


def _step_layer_norm(g: _Gen, x: int, seen: list[int]) -> int | None:
    """Layer norm over channels as converters write it (one kernel), sometimes after a residual
    ADD of an earlier tensor of the same shape, which folds into it too."""
    b = g.b
    c = b.shape(x)[-1]
    same = [t for t in seen[:-1] if b.shape(t) == b.shape(x)]
    residual = bool(same) and g.chance(0.5)
    form, beta = g.pick(("batch_norm", "centered")), g.chance(0.5)
    g.ops.append({"op": "layer_norm", "form": form, "beta": beta, "residual": residual})
    if residual:
        x = b.add(x, g.pick(same))
    gamma = (1.0 + 0.2 * g.rng.standard_normal(c)).astype(np.float32)
    bt = (0.3 * g.rng.standard_normal(c)).astype(np.float32) if beta else None
    return b.layer_norm(x, gamma, bt, form=form)


def _step_dense(g: _Gen, x: int, seen: list[int]) -> int | None:
    """Keras' Dense on the channels as the converter writes it for an unknown batch: RESHAPEs
    of shapes computed at run time (folded at Prepare) around an FC, GELU folded in."""
    c = g.b.shape(x)[-1]
    units = g.size(8, 24)
    gelu = g.chance(0.5)
    g.ops.append({"op": "keras_dense", "units": units, "gelu": gelu})
    return g.b.keras_dense(x, g.b.rand((units, c)), g.b.rand((units,), scale=0.1) if g.chance(0.5)
                           else None, activation="gelu" if gelu else None)


def _step_se_gate(g: _Gen, x: int, seen: list[int]) -> int | None:
    """A squeeze-and-excitation block as converters write it: MEAN, a 1x1 conv with RELU, a 1x1
    conv with RELU6 and a MUL by 1/6 (hard sigmoid) or a LOGISTIC, the gate's MUL of x (either
    operand first), a 1x1 projection: the squeeze, post-op and gate folds."""
    b = g.b
    c = _nhwc(g, x)[3]
    r, out_c = max(c // 4, 2), g.size(8, 24)
    hard, first = g.chance(0.5), g.chance(0.3)
    g.ops.append({"op": "se_gate", "reduced": r, "hard_sigmoid": hard, "gate_first": first,
                  "out": out_c})
    s = b.conv2d(b.mean(x, (1, 2), keep_dims=True), b.rand((r, 1, 1, c)), b.rand((r,), 0.2),
                 activation="RELU")
    if hard:
        s = b.conv2d(s, b.rand((c, 1, 1, r)), b.rand((c,), 1.0) + 3.0, activation="RELU6")
        s = b.mul(s, np.array(1 / 6, np.float32))
    else:
        s = b.logistic(b.conv2d(s, b.rand((c, 1, 1, r)), b.rand((c,), 0.2)))
    y = b.mul(s, x) if first else b.mul(x, s)
    return b.conv2d(y, b.rand((out_c, 1, 1, c)), b.rand((out_c,), 0.2))


GRAPH_STEPS: tuple[Callable[[_Gen, int, list[int]], int | None], ...] = (
    _step_conv, _step_conv, _step_conv, _step_depthwise, _step_depthwise, _step_fc,
    _step_add_const, _step_add_branch, _step_add_branch, _step_transpose_roundtrip,
    _step_elementwise, _step_elementwise, _step_pool, _step_concat, _step_pad, _step_mean,
    _step_reshape, _step_shared_fp16_weight, _step_batch_matmul, _step_layer_norm, _step_dense,
    _step_se_gate, *SELECT_STEPS,
)

# A free TRANSPOSE ends a graph: any 4-D result is still valid NHWC for the next step, but keep
# it rare so that most graphs stay image-like.
_TAIL_STEPS = (_step_transpose,)


# ---- the generator -------------------------------------------------------------------------------

KINDS: dict[str, tuple[float, Callable[[_Gen], Any]]] = {
    "conv2d": (0.22, _conv2d),
    "depthwise_conv2d": (0.14, _depthwise),
    "fully_connected": (0.13, _fully_connected),
    "add": (0.14, _add),
    "transpose": (0.12, _transpose),
    "graph": (0.25, _graph),
    "select": (0.12, select_case),
    "batch_matmul": (0.08, _batch_matmul),
}


def generate(seed: int) -> RandomCase:
    """The random case for `seed` (deterministic)."""
    g = _Gen(seed)
    names = list(KINDS)
    weights = np.array([KINDS[k][0] for k in names])
    kind = names[int(g.rng.choice(len(names), p=weights / weights.sum()))]
    result = KINDS[kind][1](g)
    outputs = result if isinstance(result, list) else [result]
    if kind == "graph" and g.chance(0.15):
        outputs[-1] = _TAIL_STEPS[0](g, outputs[-1], [])
    for t in outputs:
        g.b.output(t)
    has_conv = any(op["op"] == "conv2d" for op in g.ops)
    algorithm = "auto"
    if has_conv and g.chance(0.4):
        algorithm = g.pick(FORCED_CONV_ALGORITHMS)
    # auto is zero-copy on host-memory devices (PoCL): keep the copying path covered too.
    zero_copy = "off" if g.chance(0.3) else "auto"
    return RandomCase(seed, kind, g.b.build(), g.ops, algorithm, zero_copy)


def _fit(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Halves the batch, then cuts the channels, until an NHWC tensor is small enough."""
    n, h, w, c = shape
    while n * h * w * c > MAX_ELEMENTS and n > 1:
        n //= 2
    return n, h, w, max(1, min(c, MAX_ELEMENTS // (n * h * w)))


def _factor(size: int, rank: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A random shape of `rank` dims with `size` elements."""
    dims = []
    rest = size
    for _ in range(rank - 1):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = divisors[int(rng.integers(len(divisors)))]
        dims.append(d)
        rest //= d
    dims.append(rest)
    return tuple(dims)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    case = generate(int(argv[0]))
    print(case.describe())
    for i, (name, ins, outs) in enumerate(model_ops(case.model)):
        print(f"  node {i}: {name} inputs={ins} outputs={outs}")
    print(f"  expected delegated nodes: {sorted(expected_delegated(case.model))}")
    if len(argv) >= 3 and argv[1] == "--save":
        with open(argv[2], "wb") as f:
            f.write(case.model)
        print(f"saved {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
