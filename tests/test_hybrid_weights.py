"""Dynamic-range ("hybrid") models: float activations, int8 constant weights (symmetric, per
tensor or per output channel) in FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D and BATCH_MATMUL,
in the hybrid form (the op reads the int8 weights) and the DEQUANTIZE form (int8 constant ->
DEQUANTIZE -> float op). The delegate runs them in float on the dequantized weights, so it is
compared tightly with TFLite's float kernels on the model whose weights are those dequantized
values, and loosely with TFLite's hybrid kernels, which also quantize the activations
(docs/numerics.md, "Dynamic-range (hybrid) models")."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from parity import FP32_RTOL, check_parity, compare, precision_tolerances, run

from clgpu_delegate.modelgen import ModelBuilder, dynamic_range_model
from clgpu_delegate.modelgen._reader import read_model
from clgpu_delegate.modelgen.flatbuffer import QuantParams, _Tensor, write_model
from clgpu_delegate.runtime import make_interpreter

# TFLite's hybrid kernels against the float result on the same int8 weights: the activations'
# int8 rounding (1/254 of a row's largest value per element, symmetric; 1/255 of its range,
# asymmetric) adds up over K terms of both signs. Measured up to 0.8 % of the output's largest
# value on these models; the bound leaves room for outputs near cancellation.
HYBRID_ATOL_FRACTION = 0.03


def _fc(keep: bool = False) -> bytes:
    b = ModelBuilder(seed=1)
    x = b.input("x", (2, 3, 40) if keep else (3, 40))
    w = b.rand((17, 40), scale=0.3)
    b.output(b.fully_connected(x, w, b.rand((17,), scale=0.2), activation="RELU",
                               keep_num_dims=keep))
    return b.build()


def _conv(stride: int = 1, dilation: int = 1, batch: int = 1) -> bytes:
    b = ModelBuilder(seed=2)
    x = b.input("x", (batch, 9, 9, 5))
    b.output(b.conv2d(x, b.rand((7, 3, 3, 5), scale=0.3), b.rand((7,), scale=0.2),
                      stride=stride, dilation=dilation,
                      activation="RELU6" if stride > 1 else None))
    return b.build()


def _depthwise(multiplier: int = 1) -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 9, 9, 6))
    c = 6 * multiplier
    b.output(b.depthwise_conv2d(x, b.rand((1, 3, 3, c), scale=0.3), b.rand((c,), scale=0.2),
                                depth_multiplier=multiplier))
    return b.build()


def _batch_matmul(adj_y: bool = False) -> bytes:
    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 5, 12))
    b.output(b.batch_matmul(x, b.rand((9, 12) if adj_y else (12, 9), scale=0.3), adj_y=adj_y))
    return b.build()


MODELS: dict[str, Callable[[], bytes]] = {
    "fc": _fc,
    "fc_keep_num_dims": lambda: _fc(keep=True),
    "conv": _conv,
    "conv_stride2_relu6": lambda: _conv(stride=2),
    "conv_dilation2_batch2": lambda: _conv(dilation=2, batch=2),
    "depthwise": _depthwise,
    "depthwise_m2": lambda: _depthwise(multiplier=2),
    "batch_matmul": _batch_matmul,
    "batch_matmul_adj_y": lambda: _batch_matmul(adj_y=True),
}
# Ops with TFLite's asymmetric_quantize_inputs option.
ASYMMETRIC_OPS = ("fc", "batch_matmul")
FORMS = [("hybrid", False), ("hybrid", True), ("dequantize", False)]


def _cases() -> list[tuple[str, bool, str, bool]]:
    return [
        (name, per_channel, form, asym)
        for name in MODELS
        for per_channel in (False, True)
        for form, asym in FORMS
        if not asym or name.startswith(ASYMMETRIC_OPS)
    ]


def _id(case: tuple[str, bool, str, bool]) -> str:
    name, per_channel, form, asym = case
    return "-".join([name, "per_channel" if per_channel else "per_tensor", form]
                    + (["asymmetric"] if asym else []))


def expected_refusal(name: str, per_channel: bool, form: str, runtime: str) -> str | None:
    """A word of the reason a hybrid node stays on the CPU, or None where it is delegated."""
    if form != "hybrid":
        return None
    if name.startswith("depthwise") and not per_channel:
        return "reads one per channel"  # TFLite reads past the one scale: undefined output
    if per_channel and runtime == "tflite_runtime" and name.startswith(ASYMMETRIC_OPS):
        return "tflite_runtime 2.14"  # its kernels return zeros for per-channel weights
    return None


def _reference(model: bytes, runtime: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interp = make_interpreter(model, None, runtime=runtime, reference=True)
    interp.allocate_tensors()
    return run(interp, inputs)


def _check(name: str, per_channel: bool, form: str, asym: bool, runtime: str,
           precision: str = "fp32") -> None:
    base = MODELS[name]()
    model = dynamic_range_model(base, per_channel=per_channel, form=form, asymmetric_inputs=asym)
    refused = expected_refusal(name, per_channel, form, runtime)
    if refused:
        # Left to the CPU, which runs the model as it would without us.
        delegate_decisions = _decisions(model, runtime)
        op = next(d for d in delegate_decisions if d["op_name"] != "DEQUANTIZE")
        assert not op["delegated"] and refused in op["reason"], delegate_decisions
        return
    # Loose: against TFLite's own run of this model (its hybrid kernels, or DEQUANTIZE + float).
    tight_here = form == "dequantize"
    r = check_parity(
        model, runtime, precision=precision,
        **(precision_tolerances(precision) if tight_here else
           {"rtol": 0.0, "atol": HYBRID_ATOL_FRACTION * _peak(model, runtime)}),
        expect_delegated="all", expect_partitions=1)
    # Tight: against TFLite's float kernels on the dequantized weights.
    reference = _reference(dynamic_range_model(base, per_channel=per_channel, form="float"),
                           runtime, r.inputs)
    tol = precision_tolerances(precision)
    compare(r.outputs, reference, tol["rtol"], tol.get("atol"), f" [{runtime}, {precision}]")


def _peak(model: bytes, runtime: str) -> float:
    interp = make_interpreter(model, None, runtime=runtime, reference=True)
    interp.allocate_tensors()
    rng = np.random.default_rng(0)  # check_parity's seeded inputs (random_inputs, seed 0)
    inputs = [rng.standard_normal(tuple(d["shape"])).astype(np.float32)
              for d in interp.get_input_details()]
    return max(float(np.abs(y).max()) for y in run(interp, inputs))


def _decisions(model: bytes, runtime: str) -> list[dict[str, object]]:
    import clgpu_delegate

    delegate = clgpu_delegate.load()
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    return list(delegate.decisions())


@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_dynamic_range(case: tuple[str, bool, str, bool], runtime: str) -> None:
    _check(*case, runtime)


@pytest.mark.parametrize("name", ["fc", "conv", "depthwise_m2", "batch_matmul_adj_y"])
@pytest.mark.parametrize("form", ["hybrid", "dequantize"])
def test_dynamic_range_fp16(name: str, form: str, runtime: str) -> None:
    # Per channel where both runtimes' hybrid kernels apply it; per tensor where not.
    per_channel = name.startswith(("conv", "depthwise"))
    _check(name, per_channel, form, False, runtime, precision="fp16")


def _with_zero_point(model: bytes, zero_point: int) -> bytes:
    """`model` with every int8 constant's zero points set to `zero_point`."""
    m = read_model(model)
    tensors = []
    for t in m.tensors:
        if t.data is not None and t.dtype == np.int8 and t.quant is not None:
            q = QuantParams(t.quant.scale, (zero_point,) * len(t.quant.scale), t.quant.axis)
            t = _Tensor(t.name, t.shape, t.dtype, t.data, quant=q)
        tensors.append(t)
    return write_model(tensors, m.ops, m.inputs, m.outputs)


def test_hybrid_weights_with_a_zero_point_stay_on_the_cpu(runtime: str) -> None:
    # TFLite's hybrid kernels take weights as symmetric; the delegate declines, TFLite runs it.
    model = _with_zero_point(dynamic_range_model(_fc(), per_channel=False), 3)
    r = check_parity(model, runtime, expect_cpu="all")
    assert "zero point 3" in r.reason(0), r.decisions


def test_hybrid_uint8_weights_stay_on_the_cpu(runtime: str) -> None:
    # Only int8 symmetric weights run as dynamic-range ones; TFLite runs uint8 ones itself.
    m = read_model(dynamic_range_model(_conv(), per_channel=False))
    tensors = []
    for t in m.tensors:
        if t.data is not None and t.dtype == np.int8 and t.quant is not None:
            data = (t.data.astype(np.int16) + 128).astype(np.uint8)
            t = _Tensor(t.name, t.shape, np.dtype(np.uint8), data, quant=t.quant)
        tensors.append(t)
    r = check_parity(write_model(tensors, m.ops, m.inputs, m.outputs), runtime, expect_cpu="all")
    assert "are uint8" in r.reason(0), r.decisions


def test_dequantize_form_with_zero_points(runtime: str) -> None:
    # TFLite's DEQUANTIZE applies zero points (per channel too): so does the fold.
    model = _with_zero_point(dynamic_range_model(_conv(), per_channel=True, form="dequantize"), 5)
    check_parity(model, runtime, rtol=FP32_RTOL, expect_delegated="all", expect_partitions=1)


def test_dequantize_form_with_uint8_weights(runtime: str) -> None:
    # Older converters' uint8 weights (zero point 128) behind a DEQUANTIZE fold like int8 ones.
    m = read_model(dynamic_range_model(_fc(), per_channel=False, form="dequantize"))
    tensors = []
    for t in m.tensors:
        if t.data is not None and t.dtype == np.int8 and t.quant is not None:
            q = QuantParams(t.quant.scale, (128,), 0)
            data = (t.data.astype(np.int16) + 128).astype(np.uint8)
            t = _Tensor(t.name, t.shape, np.dtype(np.uint8), data, quant=q)
        tensors.append(t)
    model = write_model(tensors, m.ops, m.inputs, m.outputs)
    check_parity(model, runtime, expect_delegated="all", expect_partitions=1)


def test_hybrid_weights_shared_with_a_cpu_op_stay(runtime: str) -> None:
    # The int8 weights of a hybrid FC also read by a GATHER (an int8 op): not dequantized for
    # one reader only, so the FC says why it stays.
    b = ModelBuilder(seed=5)
    x = b.input("x", (3, 8))
    b.output(b.fully_connected(x, b.rand((4, 8))))
    m = read_model(dynamic_range_model(b.build(), per_channel=False))
    w = next(i for i, t in enumerate(m.tensors) if t.dtype == np.int8)
    idx = len(m.tensors)
    m.tensors.append(_Tensor("idx", (2,), np.dtype(np.int32), np.array([0, 3], np.int32)))
    m.tensors.append(_Tensor("rows", (2, 8), np.dtype(np.int8), quant=m.tensors[w].quant))
    from clgpu_delegate.modelgen.flatbuffer import _Op

    m.ops.append(_Op(36, 1, [w, idx], [idx + 1], "GatherOptions", {"Axis": 0}))
    model = write_model(m.tensors, m.ops, m.inputs, [*m.outputs, idx + 1])
    r = check_parity(model, runtime)
    assert not r.decisions[0]["delegated"], r.decisions
    assert "also read by an op" in r.reason(0), r.decisions


@pytest.mark.parametrize(("name", "axis"), [("fc", 0), ("conv", 0), ("depthwise_m2", 3),
                                            ("batch_matmul", 1), ("batch_matmul_adj_y", 0)])
def test_builder_quantizes_along_the_output_channels(name: str, axis: int) -> None:
    base = read_model(MODELS[name]())
    for form in ("hybrid", "dequantize"):
        m = read_model(dynamic_range_model(MODELS[name](), per_channel=True, form=form))
        w = next(t for t in m.tensors if t.dtype == np.int8)
        assert w.quant is not None and w.quant.axis == axis
        assert len(w.quant.scale) == w.shape[axis] and set(w.quant.zero_point) == {0}
        assert int(np.abs(w.data.astype(np.int32)).max()) == 127
        codes = [op.code for op in m.ops]
        assert codes.count(6) == (form == "dequantize")  # DEQUANTIZE
        assert len(m.ops) == len(base.ops) + (form == "dequantize")


@pytest.mark.parametrize(("name", "per_channel", "form"), [
    ("lenet5", False, "hybrid"),
    ("mobilenet_v2", True, "hybrid"),
    ("mobilenet_v2", True, "dequantize"),
])
def test_dynamic_range_models(name: str, per_channel: bool, form: str, runtime: str) -> None:
    # Whole zoo models, as the converter quantizes them: one partition, every node delegated.
    from clgpu_delegate.modelgen import zoo

    opts = {"size": 32, "num_classes": 10} if name == "mobilenet_v2" else {}
    base = zoo.build(name, **opts)
    model = dynamic_range_model(base, per_channel=per_channel, form=form)
    r = check_parity(model, runtime, rtol=0.0, atol=HYBRID_ATOL_FRACTION * _peak(model, runtime),
                     expect_delegated="all", expect_partitions=1)
    reference = _reference(dynamic_range_model(base, per_channel=per_channel, form="float"),
                           runtime, r.inputs)
    compare(r.outputs, reference, FP32_RTOL, None, f" [{runtime}]")


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_gather_of_an_int8_table(per_channel: bool, runtime: str) -> None:
    # GATHER has no hybrid kernel: its table goes behind a DEQUANTIZE, which folds.
    b = ModelBuilder(seed=6)
    x = b.input("x", (3, 8))
    table = b.const(b.rand((10, 8)), "table")
    b.output(b.add(x, b.gather(table, [1, 4, 7])))
    base = b.build()
    model = dynamic_range_model(base, per_channel=per_channel)
    r = check_parity(model, runtime, expect_delegated="all", expect_partitions=1)
    assert [d["op_name"] for d in r.decisions][0] == "DEQUANTIZE"
    reference = _reference(dynamic_range_model(base, per_channel=per_channel, form="float"),
                           runtime, r.inputs)
    compare(r.outputs, reference, FP32_RTOL, None, f" [{runtime}]")
