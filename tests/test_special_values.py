"""Special values (NaN, +-Inf, +-FLT_MAX, values past the fp16 range, denormals, -0) through every
claimed op and every convolution algorithm, fp32 and fp16 storage, against stock TFLite CPU.

Each case is a small model; each special value goes in on its own (every third element for
element-wise ops and copies, one element at two places for ops that mix a window of inputs, so
no output sees two of them). What must hold, per output element:

- NaN where, and only where, the CPU gives NaN;
- +-Inf where, and only where, the CPU gives it (TFLite's fused activations bound at +-FLT_MAX,
  its copies and concatenation do not);
- a saturated sum (+-FLT_MAX) may be a large finite value of the same sign and vice versa: a
  sum that overflows in one order of additions need not in another;
- fp16 storage holds at most 65504: a finite value past it is stored as +-65504 (not Inf, so a
  later product with zero is not NaN) and one below 2^-24 as 0, so of the outputs such an input
  reaches only those whose CPU result is past the range are checked, for their sign; an fp16
  result past the range where no input was (a fused activation's FLT_MAX) must be +-65504 or more;
- everything else within the usual tolerance (fp32 1e-4, fp16 1e-2); Winograd's within 1e-6 of
  the largest input of its tile too (its transforms mix a tile's inputs: docs/numerics.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tflite
from parity import CONV_ALGORITHMS

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

F32_MAX = float(np.finfo(np.float32).max)
F16_MAX = 65504.0
SPECIALS = {
    "fp32": {
        "nan": np.nan,
        "inf": np.inf,
        "-inf": -np.inf,
        "max": F32_MAX,
        "-max": -F32_MAX,
        "3e38": 3e38,
        "-1e37": -1e37,
        "denormal": 1e-40,
        "-denormal": -1e-40,
        "-0": -0.0,
    },
    "fp16": {
        "nan": np.nan,
        "inf": np.inf,
        "-inf": -np.inf,
        "max": F32_MAX,
        "-max": -F32_MAX,
        "1e5": 1e5,
        "-7e4": -7e4,
        "half_denormal": 1e-6,
        "denormal": 1e-40,
        "-0": -0.0,
    },
}
OPS = tflite.BuiltinOperator
_OP_NAMES = {v: k for k, v in vars(OPS).items() if not k.startswith("_")}
Build = Callable[[ModelBuilder, list[int]], int]


@dataclass(frozen=True)
class Case:
    shapes: tuple[tuple[int, ...], ...]
    build: Build
    dense: bool  # element-wise or a copy: specials may go anywhere, many at once
    algorithms: tuple[str, ...] = ("auto",)
    positive: bool = False  # LOG, SQRT, RSQRT: normal inputs above zero
    ids: tuple[int, ...] = ()  # a last, int32 input of these values (run-time positions)
    # A transform of a frame (RFFT2D): finite specials only, each output within 1e-6 of the
    # special's size. An FFT's butterflies and a direct sum of the frame's products reach
    # different bins with an Inf (TFLite's leaves some finite, -0 in others), and each rounds
    # FLT_MAX times a twiddle its own way (a bin that is 0 in exact arithmetic: -2e31 on the
    # CPU, 0 on the device). Neither is the DFT's value (docs/numerics.md).
    transform: bool = False
    # fp16 storage too: false where two ops of the case hand over a value past fp16's range
    # (stored as +-65504, where the CPU carries +-FLT_MAX's scale on).
    fp16: bool = True


def _op(code: int, table: str | None = None, **fields: Any) -> Build:
    return lambda b, x: b._op(code, list(x), [b.shape(x[0])], options=table, **fields)[0]


X4 = ((1, 9, 10, 4),)
PAIR = ((2, 5, 6, 3), (2, 5, 6, 3))
# The algorithms that apply to a filter size (forcing one elsewhere falls back to another).
ALGOS_1X1 = ("auto", "direct", "implicit_gemm", "gemm", "direct_blocked")
ALGOS_3X3 = tuple(a for a in CONV_ALGORITHMS if a != "gemm")
ALGOS_5X5 = tuple(a for a in ALGOS_3X3 if a != "winograd")


def _conv(k: int, act: str | None = None, residual: bool = False, fp16: bool = False) -> Build:
    def build(b: ModelBuilder, x: list[int]) -> int:
        y = b.conv2d(x[0], b.rand((8, k, k, 4)), b.rand((8,)), activation=act, fp16_weights=fp16)
        return b.add(y, x[1], act) if residual else y

    return build


def _unary(name: str) -> Build:
    options = {
        "LEAKY_RELU": ("LeakyReluOptions", {"Alpha": 0.2}),
        "GELU": ("GeluOptions", {"Approximate": False}),
        "HARD_SWISH": ("HardSwishOptions", {}),
    }
    table, fields = options.get(name, (None, {}))
    return _op(getattr(OPS, name), table, **fields)


CASES: dict[str, Case] = {
    "conv1x1": Case(X4, _conv(1), False, ALGOS_1X1),
    "conv1x1_relu": Case(X4, _conv(1, "RELU"), False, ALGOS_1X1),
    "conv3x3": Case(X4, _conv(3), False, ALGOS_3X3),
    "conv3x3_relu6": Case(X4, _conv(3, "RELU6"), False, ALGOS_3X3),
    "conv3x3_residual": Case(
        ((1, 9, 10, 4), (1, 9, 10, 8)), _conv(3, residual=True), False, ALGOS_3X3
    ),
    "conv5x5": Case(X4, _conv(5), False, ALGOS_5X5),
    "conv3x3_fp16_weights": Case(X4, _conv(3, "RELU", fp16=True), False),
    "conv3x3_hard_swish": Case(X4, lambda b, x: _unary("HARD_SWISH")(b, [_conv(3)(b, x)]), False),
    "depthwise": Case(X4, lambda b, x: b.depthwise_conv2d(x[0], b.rand((1, 3, 3, 4), 0.5)), False),
    "depthwise_relu6_x2": Case(
        X4,
        lambda b, x: b.depthwise_conv2d(
            x[0], b.rand((1, 3, 3, 8), 0.5), b.rand((8,)), depth_multiplier=2, activation="RELU6"
        ),
        False,
    ),
    "transpose_conv": Case(
        ((1, 5, 6, 4),),
        lambda b, x: b.transpose_conv(x[0], b.rand((3, 3, 3, 4)), (10, 12), bias=b.rand((3,))),
        False,
    ),
    "fully_connected": Case(
        ((3, 40),), lambda b, x: b.fully_connected(x[0], b.rand((8, 40))), False
    ),
    # Two layers: a dense chain where its form is on (test_fusion_dense_chain.py, whose chain
    # keeps the value between them in float32, fp16 storage or not).
    "fully_connected_x2": Case(
        ((1, 40),),
        lambda b, x: b.fully_connected(
            b.fully_connected(x[0], b.rand((16, 40)), b.rand((16,)), activation="RELU"),
            b.rand((8, 16)),
        ),
        False,
        fp16=False,
    ),
    "fully_connected_relu": Case(
        ((3, 40),),
        lambda b, x: b.fully_connected(x[0], b.rand((8, 40)), b.rand((8,)), activation="RELU"),
        False,
    ),
    "avg_pool": Case(X4, lambda b, x: b.avg_pool2d(x[0], 3, 2), False),
    "avg_pool_relu6": Case(X4, lambda b, x: b.avg_pool2d(x[0], 2, 2, "SAME", "RELU6"), False),
    "max_pool": Case(X4, lambda b, x: b.max_pool2d(x[0], 3, 2), False),
    "mean": Case(X4, lambda b, x: b.mean(x[0], (1, 2)), False),
    "sum": Case(X4, lambda b, x: b.sum(x[0], (3,)), False),
    "reduce_prod": Case(X4, lambda b, x: b._reduce(OPS.REDUCE_PROD, x[0], (2,), False), False),
    "reduce_max": Case(X4, lambda b, x: b.reduce_max(x[0], (1,)), False),
    "reduce_min": Case(X4, lambda b, x: b.reduce_min(x[0], (2, 3)), False),
    "softmax": Case(X4, lambda b, x: b.softmax(x[0]), False),
    "l2_normalization": Case(X4, lambda b, x: b.l2_normalization(x[0]), False),
    "log_softmax": Case(X4, lambda b, x: b.log_softmax(x[0]), False),
    "resize_bilinear": Case(X4, lambda b, x: b.resize_bilinear(x[0], (17, 19)), False),
    "resize_bilinear_half_pixel": Case(
        X4, lambda b, x: b.resize_bilinear(x[0], (5, 7), half_pixel_centers=True), False
    ),
    "resize_nearest": Case(X4, lambda b, x: b.resize_nearest(x[0], (17, 19)), True),
    "pad": Case(X4, lambda b, x: b.pad(x[0], [[0, 0], [1, 2], [0, 1], [0, 0]]), True),
    "pad_v2": Case(X4, lambda b, x: b.pad_v2(x[0], [[0, 0], [1, 0], [2, 1], [0, 0]], -3.5), True),
    "mirror_pad": Case(X4, lambda b, x: b.mirror_pad(x[0], [[0, 0], [2, 1], [1, 2], [0, 0]]), True),
    "tile": Case(X4, lambda b, x: b.tile(x[0], (1, 2, 1, 3)), True),
    "transpose": Case(X4, lambda b, x: b.transpose(x[0], (0, 3, 1, 2)), True),
    "concat": Case(((1, 9, 10, 4), (1, 9, 10, 3)), lambda b, x: b.concat(x, 3), True),
    "split": Case(X4, lambda b, x: b.add(*b.split(x[0], 3, 2)), True),
    "split_v": Case(X4, lambda b, x: b.concat(b.split_v(x[0], (3, 1), 3)[::-1], 3), True),
    "reshape": Case(X4, lambda b, x: b.reshape(x[0], (9, 40)), True),
    "squeeze": Case(((1, 9, 1, 4),), lambda b, x: b.squeeze(x[0], (0, 2)), True),
    "expand_dims": Case(((9, 10, 4),), lambda b, x: b.expand_dims(x[0], 1), True),
    "add_const_relu": Case(PAIR[:1], lambda b, x: b.add(x[0], b.rand((3,), 1.0), "RELU"), True),
    "add": Case(PAIR, lambda b, x: b.add(x[0], x[1]), True),
    "sub_relu6": Case(PAIR, lambda b, x: b.sub(x[0], x[1], "RELU6"), True),
    "mul": Case(PAIR, lambda b, x: b.mul(x[0], x[1]), True),
    "div": Case(PAIR, lambda b, x: b.div(x[0], x[1]), True),
    "maximum": Case(PAIR, lambda b, x: b.maximum(x[0], x[1]), True),
    "minimum": Case(PAIR, lambda b, x: b.minimum(x[0], x[1]), True),
    "squared_difference": Case(PAIR, lambda b, x: b.squared_difference(x[0], x[1]), True),
    "pow": Case(PAIR, lambda b, x: b.pow(x[0], x[1]), True),
    "prelu": Case(PAIR, lambda b, x: b.prelu(x[0], x[1]), True),
    "batch_matmul": Case(((2, 5, 6), (2, 6, 3)), lambda b, x: b.batch_matmul(x[0], x[1]), False),
    "strided_slice": Case(
        X4, lambda b, x: b.strided_slice(x[0], (0, 1, 0, 0), (1, 9, 10, 4), (1, 2, 3, 1)), True
    ),
    "slice": Case(X4, lambda b, x: b.slice(x[0], (0, 2, 1, 1), (1, 5, 8, 3)), True),
    "gather": Case(X4, lambda b, x: b.gather(x[0], [2, 0, 2, 1], axis=3), True),
    # Run-time positions into an activation's rows (tests/test_gather_indexed.py has the rest).
    "embedding_lookup": Case(
        ((5, 3, 4),), lambda b, x: b.embedding_lookup(x[1], x[0]), True, ids=(4, 0, 2, 2, 1)
    ),
    # Run-time int32 values cast to float (an attention mask), times the specials.
    "cast": Case(((2, 5),), lambda b, x: b.mul(x[0], b.cast(x[1])), True, ids=(3, 0, -2, 1000, -7)),
    "pack": Case(PAIR, lambda b, x: b.pack(x, 1), True),
    "unpack": Case(PAIR[:1], lambda b, x: b.concat(b.unpack(x[0], 3)[::-1], 2), True),
    "depth_to_space": Case(X4, lambda b, x: b.depth_to_space(x[0], 2), True),
    "space_to_depth": Case(((1, 8, 10, 3),), lambda b, x: b.space_to_depth(x[0], 2), True),
    # float -> int8 -> float: the integers saturate (+-Inf to the type's ends), as the CPU's.
    "quantize": Case(X4, lambda b, x: b.dequantize(b.quantize(x[0], 0.05, 3)), True),
    # The comparisons each guard a SELECT_V2 (bools are no special values; what they pick is).
    **{
        cmp: Case(
            PAIR, lambda b, x, cmp=cmp: b.select_v2(getattr(b, cmp)(x[0], x[1]), x[0], x[1]), True
        )
        for cmp in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
    },
    "select_logical": Case(
        PAIR,
        lambda b, x: b.select(
            b.logical_or(
                b.logical_and(b.greater(x[0], x[1]), b.less(x[1], b.rand((3,), 1.0))),
                b.logical_not(b.less_equal(x[0], b.rand((3,), 1.0))),
            ),
            x[1],
            x[0],
        ),
        True,
    ),
    "reverse_v2": Case(X4, lambda b, x: b.reverse_v2(x[0], (2,)), True),
    "rfft2d_cast": Case(
        ((2, 5, 1, 16),), lambda b, x: b.cast(b.rfft2d(x[0], (1, 16))), False, transform=True
    ),
    "rfft2d_parts": Case(
        ((2, 5, 1, 16),),
        lambda b, x: (lambda z: b.add(b.add(b.real(z), b.imag(z)), b.complex_abs(z)))(
            b.rfft2d(x[0], (1, 16))
        ),
        False,
        transform=True,
    ),
}
UNARY_OPS = (
    "RELU RELU6 RELU_N1_TO_1 RELU_0_TO_1 LEAKY_RELU HARD_SWISH LOGISTIC TANH ELU GELU EXP LOG SQRT "
    "RSQRT SQUARE ABS NEG SIN COS"
)
for _name in UNARY_OPS.split():  # noqa: SIM905
    CASES[_name.lower()] = Case(
        ((2, 5, 6, 3),), _unary(_name), True, positive=_name in "LOG SQRT RSQRT"
    )

# tflite_runtime 2.14's DEPTHWISE_CONV_2D and RELU6 kernels clamp with SIMD min/max, which turn a
# NaN into a bound; ai_edge_litert's propagate it, as every other kernel does. The delegate keeps
# NaN.
CPU_EATS_NAN = {
    ("tflite_runtime", "depthwise"),
    ("tflite_runtime", "depthwise_relu6_x2"),
    ("tflite_runtime", "relu6"),
    # tflite_runtime 2.14's BATCH_MATMUL gives +-Inf for some outputs a NaN input reaches.
    ("tflite_runtime", "batch_matmul"),
}
# Where the CPU's result is +-Inf or +-FLT_MAX, any value of the same sign passes: products
# overflow in one order of multiplication and not in another (the CPU multiplies in index order,
# FLT_MAX * 1.5 is Inf for good; the delegate by a tree), and tflite_runtime 2.14's HARD_SWISH
# computes x * relu6(x + 3) before dividing by 6 (Inf from 6e37 on; ai_edge_litert's and the
# delegate's do not overflow).
REORDERS = {
    ("*", "reduce_prod"),
    ("tflite_runtime", "hard_swish"),
    ("tflite_runtime", "conv3x3_hard_swish"),
}


def _model(case: Case) -> bytes:
    b = ModelBuilder(seed=11)
    xs = [b.input(f"x{i}", s) for i, s in enumerate(case.shapes)]
    if case.ids:
        xs.append(b.input("ids", (len(case.ids),), "int32"))
    b.output(case.build(b, xs))
    return b.build()


def _base(case: Case) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    out = [rng.standard_normal(s).astype(np.float32) for s in case.shapes]
    return [np.abs(x) + 0.1 for x in out] if case.positive else out


def _placements(case: Case) -> list[list[np.ndarray]]:
    """Boolean masks per input: where the special value goes, one placement per invoke."""
    sizes = [int(np.prod(s)) for s in case.shapes]
    if case.dense:
        # Every third element of input 0, every fifth of the others: some pairs meet.
        return [
            [
                (np.arange(n) % (3 if i == 0 else 5) == 0).reshape(s)
                for i, (n, s) in enumerate(zip(sizes, case.shapes, strict=True))
            ]
        ]
    places = []
    for where in (0, sizes[0] // 2 + 1):
        m = np.zeros(sizes[0], bool)
        m[where] = True
        places.append([m.reshape(case.shapes[0])] + [np.zeros(s, bool) for s in case.shapes[1:]])
    return places


class Runner:
    def __init__(
        self, model: bytes, runtime: str, ids: tuple[int, ...] = (), **options: Any
    ) -> None:
        self.extra = [np.array(ids, np.int32)] if ids else []
        self.delegate = clgpu_delegate.load(**options)
        self.cpu = make_interpreter(model, None, runtime=runtime, reference=True)
        self.gpu = make_interpreter(model, [self.delegate], runtime=runtime, reference=True)
        for it in (self.cpu, self.gpu):
            it.allocate_tensors()

    def _run(self, it: Any, xs: list[np.ndarray]) -> np.ndarray:
        for d, x in zip(it.get_input_details(), [*xs, *self.extra], strict=True):
            it.set_tensor(d["index"], x)
        it.invoke()
        return np.asarray(it.get_tensor(it.get_output_details()[0]["index"]).copy())

    def both(self, xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return self._run(self.gpu, xs), self._run(self.cpu, xs)

    def reached(self, base: list[np.ndarray], place: list[np.ndarray], value: float) -> np.ndarray:
        """Outputs the placed elements reach: those that change when `value` (+-1e4 for a
        non-finite one, and for one past fp16's range too: an L2 norm of FLT_MAX gives 0 as zero
        does) replaces a zero there."""

        def at(v: float) -> np.ndarray:
            return self._run(
                self.cpu, [np.where(m, np.float32(v), x) for x, m in zip(base, place, strict=True)]
            )

        zero = at(0.0)
        probes = [value] if np.isfinite(value) else [1e4, -1e4]
        if np.isfinite(value) and abs(value) > F16_MAX:
            probes += [1e4, -1e4]
        out = np.zeros(zero.shape, bool)
        with np.errstate(all="ignore"):
            for v in probes:
                out |= ~np.isclose(at(v), zero, rtol=1e-6, atol=0.0, equal_nan=True)
        return out


def check_special(
    got: np.ndarray,
    ref: np.ndarray,
    precision: str,
    reached: np.ndarray,
    inexact_fp16: bool,
    nan_allowed: bool = False,
    reorders: bool = False,
    tile_relative: float = 0.0,
) -> str:
    """ "" if `got` holds what the rules of the module docstring allow, else what differs."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"shape/dtype {got.shape} {got.dtype} vs {ref.shape} {ref.dtype}"
    with np.errstate(all="ignore"):  # Inf - Inf on the way is expected
        return _differences(
            got, ref, precision, reached, inexact_fp16, nan_allowed, reorders, tile_relative
        )


def _differences(
    got: np.ndarray,
    ref: np.ndarray,
    precision: str,
    reached: np.ndarray,
    inexact_fp16: bool,
    nan_allowed: bool,
    reorders: bool,
    tile_relative: float,
) -> str:
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    reached = reached.ravel()
    bad = np.zeros(g.shape, bool)
    ok = np.ones(g.shape, bool)
    if precision == "fp16" and inexact_fp16:
        # Saturated (or flushed to zero) in storage: where the CPU's result is past the range,
        # only its sign tells; the other outputs it reaches are not compared. Nor is the sign of
        # a result within a mixing op's rounding of the special (tile_relative).
        big = reached & ~np.isnan(r) & (np.abs(r) > max(F16_MAX, 1e-6 * tile_relative))
        bad |= big & (np.isnan(g) | (np.sign(g) != np.sign(r)))
        ok &= ~reached
    gn, rn = np.isnan(g), np.isnan(r)
    bad |= ok & rn & ~gn
    bad |= ok & gn & ~rn & ~(nan_allowed & reached)
    ok &= ~gn & ~rn
    if reorders:
        over = ok & reached & (np.abs(r) >= F32_MAX) & (np.sign(g) == np.sign(r))
        ok &= ~over
    inf = ok & (np.isinf(g) | np.isinf(r))
    bad |= inf & (g != r)
    rest = ok & ~inf
    if precision == "fp32":
        sat = rest & ((np.abs(g) == F32_MAX) | (np.abs(r) == F32_MAX))
        bad |= sat & ((np.sign(g) != np.sign(r)) | (np.minimum(abs(g), abs(r)) < F32_MAX / 16))
        rest &= ~sat
        rtol, frac = 1e-4, 1e-4
    else:
        # +-FLT_MAX from a fused activation's bound is stored as +-65504.
        big = rest & (np.abs(r) > F16_MAX)
        bad |= big & ((np.sign(g) != np.sign(r)) | (np.abs(g) < F16_MAX))
        rest &= ~big
        rtol, frac = 1e-2, 1e-2
    if rest.any():
        quiet = rest & ~reached
        peak = float(np.abs(r[quiet]).max()) if quiet.any() else 0.0
        atol = frac * max(1.0, peak)
        if np.isfinite(tile_relative):
            atol = max(atol, 1e-6 * tile_relative)
        bad |= rest & (np.abs(g - r) > atol + rtol * np.abs(r))
    if not bad.any():
        return ""
    idx = np.flatnonzero(bad)
    samples = ", ".join(f"[{i}] got {got.ravel()[i]!r} cpu {ref.ravel()[i]!r}" for i in idx[:4])
    return f"{idx.size} of {g.size} differ: {samples}"


def _params() -> list[Any]:
    out = []
    for name, case in CASES.items():
        for algo in case.algorithms:
            for precision in ("fp32", "fp16") if case.fp16 else ("fp32",):
                out.append(pytest.param(name, algo, precision, id=f"{name}-{algo}-{precision}"))
    return out


@pytest.mark.parametrize(("name", "algorithm", "precision"), _params())
def test_special_values_match_the_cpu(
    name: str, algorithm: str, precision: str, runtime: str
) -> None:
    assert_special_values_match(name, algorithm, precision, runtime)


def assert_special_values_match(
    name: str, algorithm: str, precision: str, runtime: str, **options: Any
) -> Runner:
    """Case `name` with every special value in its placements, on the delegate (`algorithm`,
    `precision`, other load() `options`) and the CPU: the rules of the module docstring, else an
    assertion naming each difference. Returns the runner (its delegate ran them)."""
    case = CASES[name]
    runner = Runner(
        _model(case),
        runtime,
        ids=case.ids,
        precision=precision,
        conv_algorithm=algorithm,
        **options,
    )
    undelegated = [d for d in runner.delegate.decisions() if not d["delegated"]]
    assert not undelegated, undelegated
    base = _base(case)
    failures = []
    for place in _placements(case):
        for kind, value in SPECIALS[precision].items():
            if case.transform and not np.isfinite(value):
                continue
            reached = runner.reached(base, place, value)
            xs = [np.where(m, np.float32(value), x) for x, m in zip(base, place, strict=True)]
            got, ref = runner.both(xs)
            why = check_special(
                got,
                ref,
                precision,
                reached,
                inexact_fp16=bool(
                    np.isfinite(value) and (abs(value) > F16_MAX or 0 < abs(value) < 2**-24)
                ),
                nan_allowed=(runtime, name) in CPU_EATS_NAN,
                reorders=bool({(runtime, name), ("*", name)} & REORDERS),
                tile_relative=abs(value)
                if algorithm.startswith("winograd") or case.transform
                else 0.0,
            )
            if why:
                failures.append(f"{kind} at {[np.flatnonzero(m)[:3] for m in place]}: {why}")
    assert not failures, "\n".join(failures)
    return runner


def test_every_claimed_op_has_a_case() -> None:
    """A new op needs a row here: special values are part of what it must get right."""
    src = Path(__file__).resolve().parent.parent / "src_cpp" / "ops"
    claimed = set()
    for f in src.glob("*.cc"):
        claimed |= set(re.findall(r'OpHandler k\w+Handler = \{\s*[\w:]+,\s*"(\w+)"', f.read_text()))
    assert len(claimed) > 40, claimed
    covered = set()
    for case in CASES.values():
        b = ModelBuilder(seed=0)
        xs = [b.input(f"x{i}", s) for i, s in enumerate(case.shapes)]
        case.build(b, xs + ([b.input("ids", (len(case.ids),), "int32")] if case.ids else []))
        covered |= {_OP_NAMES[op.code] for op in b._ops}
    assert claimed <= covered, sorted(claimed - covered)
