"""ModelBuilder ops vs numpy on both TFLite CPU runtimes, the flatbuffer layout, and the zoo."""

from __future__ import annotations

import importlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import tflite

from clgpu_delegate.modelgen import ModelBuilder, zoo

# ---- runtimes --------------------------------------------------------------------------------


def _runtime(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


_RUNTIMES = {"tflite_runtime": _runtime("tflite_runtime.interpreter"),
             "litert": _runtime("ai_edge_litert.interpreter")}


@pytest.fixture(params=list(_RUNTIMES))
def rt(request: pytest.FixtureRequest) -> ModuleType:
    module = _RUNTIMES[request.param]
    if module is None:
        pytest.skip(f"{request.param} is not installed")
    return module


def _interpreter(rt: ModuleType, model: bytes) -> Any:
    it = rt.Interpreter(model_content=model, experimental_op_resolver_type=(
        rt.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
    it.allocate_tensors()
    return it


def run(rt: ModuleType, model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Runs `model` on the runtime's builtin CPU kernels; outputs in graph order."""
    it = _interpreter(rt, model)
    for detail, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


# ---- numpy references ------------------------------------------------------------------------

ACT = {None: lambda v: v, "RELU": lambda v: np.maximum(v, 0), "RELU6": lambda v: np.clip(v, 0, 6),
       "RELU_N1_TO_1": lambda v: np.clip(v, -1, 1)}


def _window(size: int, k: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """(output length, padding before) along one axis, as TFLite computes them."""
    dk = (k - 1) * dilation + 1
    if padding == "SAME":
        out = -(-size // stride)
        return out, max((out - 1) * stride + dk - size, 0) // 2
    return -(-(size - dk + 1) // stride), 0


def _patches(x: np.ndarray, kh: int, kw: int, stride: tuple[int, int], dilation: tuple[int, int],
             padding: str, fill: float = 0.0):
    """Yields (ky, kx, strided window of x) for each kernel tap; NHWC."""
    (sh, sw), (dh, dw) = stride, dilation
    oh, pt = _window(x.shape[1], kh, sh, dh, padding)
    ow, pl = _window(x.shape[2], kw, sw, dw, padding)
    pb = max((oh - 1) * sh + (kh - 1) * dh + 1 - x.shape[1] - pt, 0)
    pr = max((ow - 1) * sw + (kw - 1) * dw + 1 - x.shape[2] - pl, 0)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    for ky in range(kh):
        for kx in range(kw):
            yield ky, kx, xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh,
                             kx * dw:kx * dw + (ow - 1) * sw + 1:sw, :]


def conv_ref(x, w, bias, stride=(1, 1), dilation=(1, 1), padding="SAME", act=None):
    """NHWC x OHWI convolution in float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    out = 0.0
    for ky, kx, patch in _patches(x, w.shape[1], w.shape[2], stride, dilation, padding):
        out = out + patch @ w[:, ky, kx, :].T
    return ACT[act](out + (0 if bias is None else bias))


def depthwise_ref(x, w, bias, stride=(1, 1), dilation=(1, 1), padding="SAME", mult=1, act=None):
    """Depthwise conv, filters (1, KH, KW, C * mult); output channel c * mult + m reads c."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    out = 0.0
    for ky, kx, patch in _patches(x, w.shape[1], w.shape[2], stride, dilation, padding):
        out = out + np.repeat(patch, mult, axis=-1) * w[0, ky, kx]
    return ACT[act](out + (0 if bias is None else bias))


def pool_ref(x, k, stride, padding, kind):
    """Max/average pool; padded taps are ignored, as in TFLite."""
    taps = np.stack([p for _, _, p in _patches(x.astype(np.float64), k, k, (stride, stride), (1, 1),
                                               padding, fill=np.nan)])
    return np.nanmax(taps, axis=0) if kind == "max" else np.nanmean(taps, axis=0)


def resize_ref(x, oh, ow, bilinear):
    """TFLite resize with align_corners=False, half_pixel_centers=False."""
    h, w = x.shape[1:3]
    ys, xs = np.arange(oh) * (h / oh), np.arange(ow) * (w / ow)
    if not bilinear:
        iy = np.minimum(np.floor(ys).astype(int), h - 1)
        ix = np.minimum(np.floor(xs).astype(int), w - 1)
        return x[:, iy][:, :, ix]
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[None, :, None, None], (xs - x0)[None, None, :, None]
    top = x[:, y0][:, :, x0] * (1 - fx) + x[:, y0][:, :, x1] * fx
    bottom = x[:, y1][:, :, x0] * (1 - fx) + x[:, y1][:, :, x1] * fx
    return top * (1 - fy) + bottom * fy


def fp16_round(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else a.astype(np.float16).astype(np.float32)


# ---- case table ------------------------------------------------------------------------------

Graph = Callable[[ModelBuilder, list[int], list[np.ndarray]], tuple[list[int], list[np.ndarray]]]


@dataclass
class Case:
    """Inputs of `shapes`; `graph` adds ops and returns (output ids, numpy expected outputs)."""

    id: str
    shapes: list[tuple[int, ...]]
    graph: Graph
    tol: float = 1e-4  # on |got - expected| / (1 + max |expected|)


def check(rt: ModuleType, case: Case) -> None:
    """Builds the case's model, runs it and compares every output with its reference."""
    b = ModelBuilder(seed=1)
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in case.shapes]
    ids = [b.input(f"in{i}", s) for i, s in enumerate(case.shapes)]
    outs, refs = case.graph(b, ids, arrays)
    for o in outs:
        b.output(o)
    got = run(rt, b.build(), arrays)
    for o, g, r in zip(outs, got, refs, strict=True):
        assert g.shape == b.shape(o) == np.shape(r), (g.shape, b.shape(o), np.shape(r))
        worst = float(np.max(np.abs(g - r), initial=0.0))
        scale = 1.0 + float(np.max(np.abs(r), initial=0.0))
        assert worst <= case.tol * scale, f"{case.id}: worst abs error {worst:.3g} (scale {scale})"


def conv_case(shape, o, k, stride=1, dilation=1, padding="SAME", bias=True, act=None, fp16=False,
              const_filters=True) -> Case:
    kh, kw = (k, k) if isinstance(k, int) else k
    st, dl = (stride, stride) if isinstance(stride, int) else stride, (dilation, dilation)
    fshape = (o, kh, kw, shape[-1])

    def graph(b, ids, xs):
        w = b.rand(fshape) if const_filters else xs[1]
        bb = b.rand((o,), scale=0.5) if bias else None
        y = b.conv2d(ids[0], w if const_filters else ids[1], bb, stride=st, dilation=dl,
                     padding=padding, activation=act, fp16_weights=fp16)
        if fp16:
            w, bb = fp16_round(w), fp16_round(bb)
        return [y], [conv_ref(xs[0], w, bb, st, dl, padding, act)]

    name = f"conv{shape}x{fshape}s{st}d{dilation}{padding}{act or ''}{'b' if bias else ''}"
    name += ("fp16" if fp16 else "") + ("" if const_filters else "dynw")
    return Case(name, [shape] if const_filters else [shape, fshape], graph,
                1e-3 if fp16 else 1e-4)


def dw_case(shape, k, mult=1, stride=1, dilation=1, padding="SAME", bias=True, act=None,
            fp16=False) -> Case:
    def graph(b, ids, xs):
        w = b.rand((1, k, k, shape[-1] * mult), scale=0.5)
        bb = b.rand((shape[-1] * mult,), scale=0.5) if bias else None
        y = b.depthwise_conv2d(ids[0], w, bb, stride=stride, dilation=dilation, padding=padding,
                               depth_multiplier=mult, activation=act, fp16_weights=fp16)
        if fp16:
            w, bb = fp16_round(w), fp16_round(bb)
        s, d = (stride, stride), (dilation, dilation)
        return [y], [depthwise_ref(xs[0], w, bb, s, d, padding, mult, act)]

    return Case(f"dw{shape}k{k}m{mult}s{stride}d{dilation}{padding}{act or ''}{fp16}", [shape],
                graph, 1e-3 if fp16 else 1e-4)


def fc_case(shape, n, bias=True, act=None, keep_num_dims=False, fp16=False) -> Case:
    k = shape[-1]

    def graph(b, ids, xs):
        w = b.rand((n, k))
        bb = b.rand((n,), scale=0.5) if bias else None
        y = b.fully_connected(ids[0], w, bb, activation=act, keep_num_dims=keep_num_dims,
                              fp16_weights=fp16)
        if fp16:
            w, bb = fp16_round(w), fp16_round(bb)
        ref = xs[0].reshape(-1, k).astype(np.float64) @ w.T + (0 if bb is None else bb)
        ref = ref.reshape(shape[:-1] + (n,)) if keep_num_dims else ref
        return [y], [ACT[act](ref)]

    return Case(f"fc{shape}x{n}{bias}{act}{keep_num_dims}{fp16}", [shape], graph,
                1e-3 if fp16 else 1e-4)


def op_case(id: str, shapes, build, ref, tol=1e-4) -> Case:
    """A single-output op: build(b, *ids) -> id, ref(*arrays) -> array."""
    return Case(id, shapes, lambda b, ids, xs: ([build(b, *ids)], [ref(*xs)]), tol)


def _hard_swish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def _softmax(x, beta=1.0):
    e = np.exp(beta * (x - x.max(-1, keepdims=True)))
    return e / e.sum(-1, keepdims=True)


C3 = np.array([0.5, -1.0, 2.0], np.float32)

DELEGATE_CASES = [
    conv_case((1, 8, 8, 3), 4, 3),
    conv_case((1, 7, 9, 5), 6, 3, stride=2, act="RELU"),
    conv_case((2, 10, 11, 4), 3, (3, 5), stride=(2, 1), padding="VALID", act="RELU6", bias=False),
    conv_case((1, 12, 12, 3), 5, 3, dilation=2, act="RELU_N1_TO_1"),
    conv_case((1, 13, 13, 8), 7, 5, stride=2, dilation=2, padding="VALID"),
    conv_case((1, 6, 6, 16), 32, 1),
    conv_case((1, 9, 9, 3), 4, 3, fp16=True, act="RELU"),
    conv_case((1, 8, 8, 3), 4, 3, const_filters=False),
    conv_case((1, 224 // 8, 224 // 8, 3), 8, 7, stride=4, padding="VALID"),
    dw_case((1, 8, 8, 3), 3),
    dw_case((1, 9, 7, 4), 3, stride=2, act="RELU6"),
    dw_case((1, 10, 10, 3), 3, mult=2, bias=False),
    dw_case((1, 11, 11, 5), 5, dilation=2, padding="VALID", act="RELU"),
    dw_case((1, 8, 8, 6), 3, fp16=True),
    fc_case((1, 16), 10),
    fc_case((3, 20), 7, act="RELU", bias=False),
    fc_case((1, 4, 4, 8), 5),  # K = 8: flattened to (16, 8)
    fc_case((2, 3, 12), 4, keep_num_dims=True, act="RELU6"),
    fc_case((1, 32), 8, fp16=True),
    op_case("add", [(1, 4, 4, 3)] * 2, lambda b, x, y: b.add(x, y), np.add),
    op_case("add_bcast", [(1, 4, 1, 3), (1, 1, 5, 3)], lambda b, x, y: b.add(x, y, "RELU"),
            lambda x, y: np.maximum(x + y, 0)),
    op_case("add_const", [(1, 4, 4, 3)], lambda b, x: b.add(x, C3), lambda x: x + C3),
    op_case("add_scalar", [(2, 5)], lambda b, x: b.add(x, 0.25), lambda x: x + 0.25),
    op_case("transpose_nchw", [(1, 4, 5, 3)], lambda b, x: b.transpose(x, (0, 3, 1, 2)),
            lambda x: x.transpose(0, 3, 1, 2)),
    op_case("transpose_2d", [(6, 7)], lambda b, x: b.transpose(x, [1, 0]), np.transpose),
    op_case("transpose_5d", [(2, 3, 4, 5, 6)], lambda b, x: b.transpose(x, (4, 2, 0, 3, 1)),
            lambda x: x.transpose(4, 2, 0, 3, 1)),
]

CPU_CASES = [
    op_case("mul", [(1, 4, 4, 3), (3,)], lambda b, x, y: b.mul(x, y), np.multiply),
    op_case("sub_relu6", [(1, 4, 4, 3)] * 2, lambda b, x, y: b.sub(x, y, "RELU6"),
            lambda x, y: np.clip(x - y, 0, 6)),
    op_case("relu", [(2, 9)], lambda b, x: b.relu(x), ACT["RELU"]),
    op_case("relu6", [(2, 9)], lambda b, x: b.relu6(b.mul(x, 5.0)), lambda x: ACT["RELU6"](5 * x)),
    op_case("tanh", [(2, 9)], lambda b, x: b.tanh(x), np.tanh, 1e-5),
    op_case("logistic", [(2, 9)], lambda b, x: b.logistic(x), lambda x: 1 / (1 + np.exp(-x)),
            1e-5),
    op_case("hard_swish", [(1, 3, 3, 4)], lambda b, x: b.hard_swish(b.mul(x, 4.0)),
            lambda x: _hard_swish(4 * x)),
    op_case("max_pool", [(1, 9, 9, 3)], lambda b, x: b.max_pool2d(x, 3, 2),
            lambda x: pool_ref(x, 3, 2, "VALID", "max")),
    op_case("max_pool_same", [(1, 8, 8, 3)], lambda b, x: b.max_pool2d(x, 3, 2, "SAME"),
            lambda x: pool_ref(x, 3, 2, "SAME", "max")),
    op_case("avg_pool", [(1, 8, 8, 3)], lambda b, x: b.avg_pool2d(x, 2, 2),
            lambda x: pool_ref(x, 2, 2, "VALID", "avg")),
    op_case("avg_pool_same", [(1, 7, 7, 2)], lambda b, x: b.avg_pool2d(x, 3, 2, "SAME"),
            lambda x: pool_ref(x, 3, 2, "SAME", "avg")),
    op_case("concat", [(1, 4, 4, 3), (1, 4, 4, 5)], lambda b, x, y: b.concat([x, y], -1),
            lambda x, y: np.concatenate([x, y], -1)),
    op_case("concat_axis1", [(1, 2, 4, 3), (1, 3, 4, 3)],
            lambda b, x, y: b.concat([x, y], 1),
            lambda x, y: np.concatenate([x, y], 1)),
    op_case("reshape", [(1, 4, 4, 3)], lambda b, x: b.reshape(x, (1, -1)),
            lambda x: x.reshape(1, -1)),
    op_case("pad", [(1, 3, 3, 2)], lambda b, x: b.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]),
            lambda x: np.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]])),
    op_case("mean", [(1, 5, 6, 3)], lambda b, x: b.mean(x, (1, 2)), lambda x: x.mean((1, 2))),
    op_case("mean_keep", [(1, 5, 6, 3)], lambda b, x: b.mean(x, [-1], keep_dims=True),
            lambda x: x.mean(-1, keepdims=True)),
    op_case("softmax", [(2, 10)], lambda b, x: b.softmax(x, beta=0.5),
            lambda x: _softmax(x, 0.5), 1e-5),
    op_case("resize_nearest", [(1, 3, 4, 2)], lambda b, x: b.resize_nearest(x, (6, 8)),
            lambda x: resize_ref(x, 6, 8, False)),
    op_case("resize_nearest_odd", [(1, 5, 5, 2)], lambda b, x: b.resize_nearest(x, (7, 3)),
            lambda x: resize_ref(x, 7, 3, False)),
    op_case("resize_bilinear", [(1, 3, 4, 2)], lambda b, x: b.resize_bilinear(x, (7, 9)),
            lambda x: resize_ref(x, 7, 9, True)),
    Case("split", [(1, 4, 4, 6)], lambda b, ids, xs: (b.split(ids[0], 3, 3),
                                                        np.split(xs[0], 3, axis=3))),
    op_case("dynamic_flatten", [(2, 3, 4, 5)], lambda b, x: b.dynamic_reshape_flatten(x),
            lambda x: x.reshape(2, -1)),
    op_case("zero_size", [(0, 4)], lambda b, x: b.add(x, np.ones(4, np.float32)),
            lambda x: x + 1),
]


def _mixed(b: ModelBuilder, ids: list[int], xs: list[np.ndarray]):
    """Delegate and CPU ops interleaved, with two outputs."""
    w1, w2 = b.rand((8, 3, 3, 4)), b.rand((1, 3, 3, 8), scale=0.5)
    y = b.conv2d(ids[0], w1, activation="RELU")
    z = b.depthwise_conv2d(b.mul(y, 0.5), w2, stride=2)
    out = b.add(z, b.max_pool2d(y, 2, 2, "SAME"))
    r_y = conv_ref(xs[0], w1, None, act="RELU")
    r_z = depthwise_ref(0.5 * r_y, w2, None, (2, 2))
    return [out, y], [r_z + pool_ref(r_y, 2, 2, "SAME", "max"), r_y]


MIXED = Case("mixed", [(1, 9, 9, 4)], _mixed)


@pytest.mark.parametrize("case", DELEGATE_CASES + CPU_CASES + [MIXED], ids=lambda c: c.id)
def test_op_matches_numpy(rt: ModuleType, case: Case) -> None:
    check(rt, case)


def test_dynamic_reshape_output_is_dynamic() -> None:
    # Only TFLite 2.14 shows it: a dynamic tensor has no data until invoke.
    rt = _RUNTIMES["tflite_runtime"]
    if rt is None:
        pytest.skip("tflite_runtime is not installed")
    b = ModelBuilder()
    y = b.dynamic_reshape_flatten(b.input("x", (1, 4, 4, 3)))
    b.output(y)
    it = _interpreter(rt, b.build())
    with pytest.raises(ValueError, match="null"):
        it.get_tensor(it.get_output_details()[0]["index"])
    assert b.shape(y) == (1, 48)


def test_high_builtin_code_uses_placeholder(rt: ModuleType) -> None:
    # No public op has a code > 127; GELU (150) exercises the schema's placeholder convention.
    b = ModelBuilder()
    x = b.input("x", (2, 7))
    b.output(b._op(tflite.BuiltinOperator.GELU, [x], [(2, 7)], options="GeluOptions")[0])
    data = b.build()
    code = tflite.Model.GetRootAs(data, 0).OperatorCodes(0)
    assert (code.DeprecatedBuiltinCode(), code.BuiltinCode()) == (127, 150)
    xs = np.linspace(-3, 3, 14, dtype=np.float32).reshape(2, 7)
    ref = xs * 0.5 * (1 + np.vectorize(math.erf)(xs / math.sqrt(2)))
    np.testing.assert_allclose(run(rt, data, [xs])[0], ref, atol=1e-4)


# ---- flatbuffer layout -----------------------------------------------------------------------

_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


def op_counts(data: bytes) -> Counter[str]:
    model = tflite.Model.GetRootAs(data, 0)
    graph = model.Subgraphs(0)
    codes = [model.OperatorCodes(graph.Operators(i).OpcodeIndex()).BuiltinCode()
             for i in range(graph.OperatorsLength())]
    return Counter(_OP_NAMES[c] for c in codes)


def test_model_layout() -> None:
    b = ModelBuilder()
    x = b.input("image", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), np.zeros(4, np.float32))
    y = b.conv2d(y, b.rand((4, 1, 1, 4)), fp16_weights=True)
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 4)), dilation=2)
    b.output(y)
    b.output(b.fully_connected(y, b.rand((5, 256)), keep_num_dims=False))
    model = tflite.Model.GetRootAs(b.build(), 0)
    assert model.Version() == 3
    assert model.Buffers(0).DataLength() == 0
    codes = {(_OP_NAMES[model.OperatorCodes(i).BuiltinCode()], model.OperatorCodes(i).Version())
             for i in range(model.OperatorCodesLength())}
    assert codes == {("CONV_2D", 1), ("DEQUANTIZE", 3), ("DEPTHWISE_CONV_2D", 2),
                     ("FULLY_CONNECTED", 1)}
    assert model.OperatorCodesLength() == 4  # the two convs share one code
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        assert code.DeprecatedBuiltinCode() == code.BuiltinCode()
    graph = model.Subgraphs(0)
    names = [graph.Tensors(i).Name() for i in range(graph.TensorsLength())]
    assert len(set(names)) == len(names) and names[0] == b"image"
    types = Counter(graph.Tensors(i).Type() for i in range(graph.TensorsLength()))
    assert types[tflite.TensorType.FLOAT16] == 2  # filters and the zero bias
    assert graph.InputsAsNumpy().tolist() == [x] and graph.OutputsLength() == 2
    fc = graph.Operators(graph.OperatorsLength() - 1)
    assert fc.InputsAsNumpy().tolist()[2] == -1  # no bias: optional input omitted
    for i in range(1, model.BuffersLength()):
        buf = model.Buffers(i)
        if buf.DataLength():
            assert buf._tab.Vector(buf._tab.Offset(4)) % 16 == 0  # data start in the file


def test_shapes_and_names() -> None:
    b = ModelBuilder()
    x = b.input("x", (1, 15, 15, 3))
    assert b.shape(b.conv2d(x, b.rand((2, 3, 3, 3)), stride=2)) == (1, 8, 8, 2)
    assert b.shape(b.conv2d(x, b.rand((2, 3, 3, 3)), stride=2, padding="VALID")) == (1, 7, 7, 2)
    assert b.shape(b.conv2d(x, b.rand((2, 3, 3, 3)), dilation=3, padding="VALID")) == (1, 9, 9, 2)
    assert b.shape(b.depthwise_conv2d(x, b.rand((1, 5, 5, 6)), stride=(2, 3), padding="VALID",
                                      depth_multiplier=2)) == (1, 6, 4, 6)
    assert b.shape(b.max_pool2d(x, 3, 2)) == (1, 7, 7, 3)
    assert [b.shape(t) for t in b.split(x, 3, 3)] == [(1, 15, 15, 1)] * 3
    assert b.const(np.zeros(3, np.int32), name="named") >= 0
    with pytest.raises(ValueError, match="already used"):
        b.const(np.zeros(3, np.float32), name="named")
    w = b.rand((64, 3, 3, 32))
    assert w.dtype == np.float32 and abs(w.std() - math.sqrt(2 / 288)) < 0.01
    assert np.array_equal(ModelBuilder(seed=5).rand((4, 4)), ModelBuilder(seed=5).rand((4, 4)))


def _bad_calls() -> list[tuple[str, Callable[[ModelBuilder, int], object]]]:
    f = np.zeros((4, 3, 3, 3), np.float32)
    return [
        ("channels", lambda b, x: b.conv2d(x, np.zeros((4, 3, 3, 2), np.float32))),
        ("padding", lambda b, x: b.conv2d(x, f, padding="FULL")),
        ("activation", lambda b, x: b.conv2d(x, f, activation="GELU")),
        ("stride", lambda b, x: b.conv2d(x, f, stride=0)),
        ("valid_too_big", lambda b, x: b.conv2d(x, np.zeros((1, 9, 9, 3), np.float32),
                                                padding="VALID")),
        ("bias_shape", lambda b, x: b.conv2d(x, f, np.zeros(3, np.float32))),
        ("filter_rank", lambda b, x: b.conv2d(x, np.zeros((4, 3, 3), np.float32))),
        ("fp16_tensor_filter", lambda b, x: b.conv2d(x, b.input("w", (4, 3, 3, 3)),
                                                     fp16_weights=True)),
        ("dw_multiplier", lambda b, x: b.depthwise_conv2d(x, np.zeros((1, 3, 3, 6), np.float32))),
        ("fc_k", lambda b, x: b.fully_connected(x, np.zeros((4, 7), np.float32))),
        ("fc_keep", lambda b, x: b.fully_connected(x, np.zeros((4, 64), np.float32),
                                                   keep_num_dims=True)),
        ("broadcast", lambda b, x: b.add(x, np.zeros(4, np.float32))),
        ("perm", lambda b, x: b.transpose(x, (0, 1, 1, 2))),
        ("concat", lambda b, x: b.concat([x, b.input("y", (1, 7, 8, 3))], 3)),
        ("axis", lambda b, x: b.concat([x], 4)),
        ("reshape", lambda b, x: b.reshape(x, (5, -1))),
        ("reshape_two_unknown", lambda b, x: b.reshape(x, (-1, -1))),
        ("split", lambda b, x: b.split(x, 3, 2)),
        ("pad", lambda b, x: b.pad(x, [[0, 0], [1, 1]])),
        ("resize", lambda b, x: b.resize_nearest(x, (0, 4))),
        ("const_dtype", lambda b, x: b.const(np.zeros(3))),
        ("const_type", lambda b, x: b.const([1.0, 2.0])),
        ("tensor_id", lambda b, x: b.relu(99)),
        ("input_dtype", lambda b, x: b.input("z", (1,), dtype="float64")),
        ("input_shape", lambda b, x: b.input("z", (1, -1))),
        ("input_name", lambda b, x: b.input("x", (1,))),
        ("output_twice", lambda b, x: [b.output(x), b.output(x)]),
        ("no_outputs", lambda b, x: b.build()),
    ]


@pytest.mark.parametrize(("what", "call"), _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_invalid_arguments_raise(what: str, call: Callable[[ModelBuilder, int], object]) -> None:
    b = ModelBuilder()
    with pytest.raises(ValueError):
        call(b, b.input("x", (1, 8, 8, 3)))


def test_save(tmp_path) -> None:
    b = ModelBuilder()
    b.output(b.relu(b.input("x", (3,))))
    path = b.save(tmp_path / "m.tflite")
    assert path.read_bytes() == b.build() and path.read_bytes()[4:8] == b"TFL3"


# ---- zoo -------------------------------------------------------------------------------------

# Options that keep the suite fast; outputs are logits so their scale can be checked.
ZOO_OPTS = {"lenet5": {}, "mobilenet_v1": {"size": 128}, "mobilenet_v2": {},
            "inception_v1": {"size": 160}, "inception_v3": {"size": 107},
            "resnet50": {"size": 128}, "alexnet": {}, "pynet": {"size": 64}}
# (input shape at ZOO_OPTS, output shape, op counts that make the architecture recognisable)
ZOO_EXPECT = {
    "lenet5": ((1, 32, 32, 1), (1, 10), {"CONV_2D": 2, "AVERAGE_POOL_2D": 2,
                                         "FULLY_CONNECTED": 3}),
    "mobilenet_v1": ((1, 128, 128, 3), (1, 1001), {"CONV_2D": 15, "DEPTHWISE_CONV_2D": 13}),
    "mobilenet_v2": ((1, 224, 224, 3), (1, 1001), {"CONV_2D": 36, "DEPTHWISE_CONV_2D": 17,
                                                   "ADD": 10}),
    "inception_v1": ((1, 160, 160, 3), (1, 1000), {"CONV_2D": 57, "CONCATENATION": 9,
                                                   "MAX_POOL_2D": 13, "FULLY_CONNECTED": 1}),
    "inception_v3": ((1, 107, 107, 3), (1, 1000), {"CONV_2D": 94, "CONCATENATION": 15,
                                                   "MAX_POOL_2D": 4, "AVERAGE_POOL_2D": 10,
                                                   "FULLY_CONNECTED": 1}),
    "resnet50": ((1, 128, 128, 3), (1, 1000), {"CONV_2D": 53, "ADD": 16, "MEAN": 1,
                                               "FULLY_CONNECTED": 1}),
    "alexnet": ((1, 227, 227, 3), (1, 1000), {"CONV_2D": 8, "SPLIT": 3, "CONCATENATION": 3,
                                              "MAX_POOL_2D": 3, "FULLY_CONNECTED": 3}),
    "pynet": ((1, 64, 64, 3), (1, 64, 64, 3), {"RESIZE_NEAREST_NEIGHBOR": 3,
                                               "RESIZE_BILINEAR": 1}),
}


@cache
def _zoo_model(name: str) -> bytes:
    opts = dict(ZOO_OPTS[name])
    if name != "pynet":
        opts["softmax"] = False
    return zoo.build(name, **opts)


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_zoo_model_runs(rt: ModuleType, name: str) -> None:
    data = _zoo_model(name)
    in_shape, out_shape, counts = ZOO_EXPECT[name]
    ops = op_counts(data)
    assert {k: ops[k] for k in counts} == counts
    x = np.random.default_rng(0).standard_normal(in_shape).astype(np.float32)
    (y,) = run(rt, data, [x])
    assert y.shape == out_shape and np.isfinite(y).all()
    # He-scaled weights: the output neither vanishes nor explodes.
    assert 0.1 < float(y.std()) < 10.0, float(y.std())


def _conv_kernels(name: str) -> Counter[tuple[int, int]]:
    """(KH, KW) of every CONV_2D of zoo model `name`, counted."""
    model = tflite.Model.GetRootAs(_zoo_model(name), 0)
    graph = model.Subgraphs(0)
    kernels: Counter[tuple[int, int]] = Counter()
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if _OP_NAMES[model.OperatorCodes(op.OpcodeIndex()).BuiltinCode()] == "CONV_2D":
            shape = graph.Tensors(op.Inputs(1)).ShapeAsNumpy()
            kernels[int(shape[1]), int(shape[2])] += 1
    return kernels


def test_zoo_pynet_kernels() -> None:
    assert set(_conv_kernels("pynet")) == {(3, 3), (5, 5), (7, 7), (9, 9)}


def test_zoo_inception_v3_kernels() -> None:
    # Keras InceptionV3: 7x7s factorized into 1x7 + 7x1 (mixed4-8), 1x3 / 3x1 forks (mixed9-10).
    assert _conv_kernels("inception_v3") == {(1, 1): 40, (3, 3): 17, (5, 5): 3, (1, 7): 13,
                                             (7, 1): 13, (1, 3): 4, (3, 1): 4}


def test_zoo_softmax_and_fp16(rt: ModuleType) -> None:
    x = np.random.default_rng(0).standard_normal((1, 32, 32, 1)).astype(np.float32)
    (p,) = run(rt, zoo.build("lenet5"), [x])
    assert p.shape == (1, 10) and abs(float(p.sum()) - 1) < 1e-5
    fp16 = zoo.build("lenet5", softmax=False, fp16_weights=True)
    assert op_counts(fp16)["DEQUANTIZE"] == 10  # weights and bias of 5 layers
    np.testing.assert_allclose(run(rt, fp16, [x])[0], run(rt, _zoo_model("lenet5"), [x])[0],
                               rtol=0.02, atol=0.02)


def test_zoo_path_caches(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    p = zoo.path("lenet5")
    assert p.parent == tmp_path / "clgpu_delegate" / "models" and p.read_bytes()[4:8] == b"TFL3"
    assert zoo.path("lenet5", size=32) == p  # default options share the file
    monkeypatch.setattr(zoo, "build", lambda *a, **k: pytest.fail("rebuilt a cached model"))
    assert zoo.path("lenet5") == p
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    q = zoo.path("lenet5", num_classes=7)
    assert q != p and "num_classes7" in q.name
    assert sorted(f.name for f in p.parent.iterdir()) == sorted([p.name, q.name])  # no temps
    with pytest.raises(ValueError, match="unknown model"):
        zoo.path("vgg16")
    with pytest.raises(TypeError):
        zoo.path("lenet5", depth=3)


@pytest.mark.parametrize("act", ["TANH", "SIGN_BIT"])
def test_cpu_ignores_fused_tanh_and_sign_bit(rt: ModuleType, act: str) -> None:
    # The schema allows them, but TFLite's float CONV_2D / DEPTHWISE / ADD kernels skip them
    # (FULLY_CONNECTED refuses them): a delegate must not apply them, or refuse such nodes.
    b = ModelBuilder()
    x = b.input("x", (1, 4, 4, 2))
    b.output(b.conv2d(x, np.full((2, 1, 1, 2), 5, np.float32), activation=act))
    b.output(b.depthwise_conv2d(x, np.full((1, 1, 1, 2), 5, np.float32), activation=act))
    b.output(b.add(x, x, activation=act))
    conv, dw, add = run(rt, b.build(), [np.full((1, 4, 4, 2), 3, np.float32)])
    assert conv.max() == 30 and dw.max() == 15 and add.max() == 6
