"""Models stock TFLite refuses must be refused with the delegate too (its kernels' Prepare never
runs for a node the delegate claims), graphs it survives must not crash with the delegate, and
sizes too large for the device kernels fail at once with a message. Each model runs in a child
process (tests/fuzz/worker.py: the delegated interpreter, then stock TFLite), so a crash fails
the test instead of pytest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tflite
from fuzz.run import Worker, child_env
from parity import CPU_OP, cpu_op

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

OPS = tflite.BuiltinOperator
Edit = Callable[[ModelBuilder], None]


def _op(b: ModelBuilder, code: int) -> Any:
    return next(o for o in b._ops if o.code == code)


def _inputs(code: int, f: Callable[[ModelBuilder, list[int]], list[int]]) -> Edit:
    def edit(b: ModelBuilder) -> None:
        op = _op(b, code)
        op.inputs = f(b, op.inputs)

    return edit


def _extra(b: ModelBuilder, ins: list[int]) -> list[int]:
    return [*ins, b._const(np.ones((4,), np.float32), "extra")]


def _model(kind: str, edit: Edit) -> bytes:
    b = ModelBuilder(seed=1)
    if kind == "conv":
        b.output(b.conv2d(b.input("x", (1, 5, 5, 3)), b.rand((4, 3, 3, 3)), b.rand((4,))))
    elif kind == "depthwise":
        b.output(b.depthwise_conv2d(b.input("x", (1, 5, 5, 3)), b.rand((1, 3, 3, 3)), b.rand((3,))))
    elif kind == "fc":
        b.output(b.fully_connected(b.input("x", (2, 6)), b.rand((4, 6)), b.rand((4,))))
    elif kind == "split":
        for y in b.split(b.input("x", (2, 6, 4)), 1, 3):
            b.output(y)
    elif kind == "split_v":
        for y in b.split_v(b.input("x", (2, 6, 4)), (2, 4), 1):
            b.output(y)
    elif kind == "resize":
        b.output(b.resize_bilinear(b.input("x", (1, 4, 4, 2)), (8, 8)))
    elif kind == "prelu":
        b.output(b.prelu(b.input("x", (1, 4, 4, 1)), b.rand((3,))))
    elif kind == "transpose_conv":
        x = b.input("x", (1, 3, 3, 2))
        b.output(b.transpose_conv(x, b.rand((4, 3, 3, 2)), (6, 6), bias=b.rand((4,))))
    edit(b)
    return b.build()


def _resize_size_rank_2(b: ModelBuilder) -> None:
    t = b._tensors[_op(b, OPS.RESIZE_BILINEAR).inputs[1]]
    t.shape, t.data = (1, 2), np.array([[8, 8]], np.int32)


def _stride(value: int) -> Edit:
    return lambda b: _op(b, OPS.TRANSPOSE_CONV).fields.update(StrideW=value)


# name -> (model kind, edit). Stock TFLite refuses each in both runtimes; the delegate used to
# claim and run them.
REFUSED = {
    "conv_without_bias": ("conv", _inputs(OPS.CONV_2D, lambda b, i: i[:2])),
    "conv_bias_minus_one": ("conv", _inputs(OPS.CONV_2D, lambda b, i: [*i[:2], -1])),
    "conv_extra_input": ("conv", _inputs(OPS.CONV_2D, _extra)),
    "depthwise_bias_minus_one": (
        "depthwise",
        _inputs(OPS.DEPTHWISE_CONV_2D, lambda b, i: [*i[:2], -1]),
    ),
    "depthwise_extra_input": ("depthwise", _inputs(OPS.DEPTHWISE_CONV_2D, _extra)),
    "fc_extra_input": ("fc", _inputs(OPS.FULLY_CONNECTED, _extra)),
    "split_num_splits_2_of_3": ("split", lambda b: _op(b, OPS.SPLIT).fields.update(NumSplits=2)),
    "split_missing_output": (
        "split",
        lambda b: setattr(_op(b, OPS.SPLIT), "outputs", _op(b, OPS.SPLIT).outputs[:2]),
    ),
    "split_v_num_splits_3_of_2": (
        "split_v",
        lambda b: _op(b, OPS.SPLIT_V).fields.update(NumSplits=3),
    ),
    "resize_size_rank_2": ("resize", _resize_size_rank_2),
    "prelu_alpha_wider_than_input": ("prelu", lambda b: None),
}
# ai_edge_litert checks a transpose convolution's input against its output shape and stride;
# tflite_runtime 2.14 runs it (reading past the input): the delegate leaves it to the CPU.
LITERT_REFUSES = {
    "transpose_conv_stride_4_of_2": ("transpose_conv", _stride(4)),
}
ACCEPTED = {
    "fc_without_bias": ("fc", _inputs(OPS.FULLY_CONNECTED, lambda b, i: i[:2])),
    "fc_bias_minus_one": ("fc", _inputs(OPS.FULLY_CONNECTED, lambda b, i: [*i[:2], -1])),
    "transpose_conv_bias_minus_one": (
        "transpose_conv",
        _inputs(OPS.TRANSPOSE_CONV, lambda b, i: [*i[:3], -1]),
    ),
}


def _outcome(runtime: str, model: bytes, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    w = Worker(runtime, child_env())
    try:
        o = w.run("all", path, 120)
    finally:
        w.stop()
    assert o.status == "done", f"the child {o.status} in {o.stage}: {o.detail}"
    return o.result


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_models_the_cpu_refuses_are_refused(name: str, runtime: str, tmp_path: Path) -> None:
    r = _outcome(runtime, _model(*REFUSED[name]), tmp_path)
    assert r["cpu"].startswith("raised"), r
    assert r["delegate"].startswith("raised"), r


@pytest.mark.parametrize("name", sorted(LITERT_REFUSES))
def test_what_only_litert_refuses_stays_on_the_cpu(name: str, runtime: str, tmp_path: Path) -> None:
    r = _outcome(runtime, _model(*LITERT_REFUSES[name]), tmp_path)
    if runtime == "ai_edge_litert":
        assert r["cpu"].startswith("raised") and r["delegate"].startswith("raised"), r
    else:
        assert r["claimed"] == 0 and r["cpu"] == r["delegate"] == "ran", r
        assert r["compare"] == "same", r


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_optional_inputs_the_cpu_accepts_are_claimed(
    name: str, runtime: str, tmp_path: Path
) -> None:
    r = _outcome(runtime, _model(*ACCEPTED[name]), tmp_path)
    assert r["claimed"] == 1 and r["cpu"] == r["delegate"] == "ran", r
    assert r["compare"] == "same", r


def _read_before_written(cpu_second: bool) -> bytes:
    """Node 0 reads the output of node 1 (a tensor written later in the execution plan)."""
    b = ModelBuilder(seed=1)
    x = b.input("x", (1, 4, 4, 2))
    y = b.add(x, b.rand((2,)))
    z = cpu_op(b, y) if cpu_second else b.mul(y, b.rand((2,)))
    b.output(z)
    b._ops[0].inputs = [b._ops[1].outputs[0], b._ops[0].inputs[1]]
    return b.build()


@pytest.mark.parametrize("cpu_second", [False, True], ids=["claimable", "with_a_cpu_op"])
def test_a_graph_read_before_written_is_left_to_the_cpu(
    cpu_second: bool, runtime: str, tmp_path: Path
) -> None:
    """tflite_runtime 2.14's partitioner crashed on it (through PreviewDelegatePartitioning,
    even with nothing claimed); now nothing is claimed and TFLite is not asked to partition."""
    model = _read_before_written(cpu_second)
    r = _outcome(runtime, model, tmp_path)
    assert r["claimed"] == 0 and r["cpu"] == r["delegate"] == "ran", r
    d = clgpu_delegate.load()
    make_interpreter(model, [d], runtime=runtime, reference=True)
    assert all("out of order" in x["reason"] for x in d.decisions() if x["op_name"] != CPU_OP)


def test_an_op_output_that_the_model_also_gives_data_is_the_ops(runtime: str) -> None:
    """TFLite's kernels overwrite such data, but its partitioner takes the tensor for a constant:
    the model is left to the CPU whole (tests/test_hostile_constants.py compares the outputs)."""
    b = ModelBuilder(seed=1)
    y = b.conv2d(b.input("x", (1, 5, 5, 3)), b.rand((4, 3, 3, 3)), b.rand((4,)))
    b.output(b.add(y, b.rand((4,))))
    t = b._tensors[_op(b, OPS.CONV_2D).outputs[0]]
    t.data = np.full(t.shape, 7.0, np.float32)
    d = clgpu_delegate.load()
    make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    assert not any(x["delegated"] for x in d.decisions()), d.decisions()
    assert all("also holds" in x["reason"] for x in d.decisions()), d.decisions()


SIZE_CHILD = """
import resource, sys, time, numpy as np, clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter
if "libasan" not in __import__("os").environ.get("LD_PRELOAD", ""):
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
b = ModelBuilder(seed=1)
b.output(b.conv2d(b.input("x", (1, 8, 8, 1)), b.rand((1, 1, 1, 1)), b.rand((1,))))
it = make_interpreter(b.build(), [clgpu_delegate.load()], runtime=sys.argv[1], reference=True)
it.allocate_tensors()
it.resize_tensor_input(it.get_input_details()[0]["index"], [1, 46341, 46341, 1])
t = time.monotonic()
try:
    it.allocate_tensors()
    print("ALLOCATED")
except Exception as e:
    print("RAISED", type(e).__name__, round(time.monotonic() - t, 1), repr(str(e)))
"""


def test_a_resize_past_2_to_the_31_elements_fails_at_once_with_a_message(
    runtime: str, run_python: Callable[..., Any]
) -> None:
    """A 1x1 conv resized to 46341 x 46341 (2^31 + 4633 elements): the driver aborted the
    process, or TFLite failed later with an empty message; LiteRT's CPU kernel says "Conv
    output spatial dimensions overflow"."""
    p = run_python([*["-c", SIZE_CHILD], runtime], timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    line = p.stdout.strip().splitlines()[-1]
    assert line.startswith("RAISED RuntimeError"), p.stdout + p.stderr[-2000:]
    assert "2147483647 elements" in line and "46341" in line, line
    assert float(line.split()[2]) < 10, line


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D"])
def test_a_window_larger_than_its_input_is_refused_like_the_cpu(op: str, runtime: str) -> None:
    """A VALID window that does not fit its (resized) input: TFLite's convolutions compute a
    negative output size and refuse it; the delegate returned an empty output (a real model,
    oww_melspectrogram, at its default input size). Pools: LiteRT gives an empty output,
    tflite_runtime refuses; the delegate does as the runtime it runs in."""
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 8, 2))
    if op == "CONV_2D":
        b.output(b.conv2d(x, b.rand((3, 5, 5, 2)), b.rand((3,)), padding="VALID"))
    elif op == "DEPTHWISE_CONV_2D":
        b.output(b.depthwise_conv2d(x, b.rand((1, 5, 5, 2)), padding="VALID"))
    else:
        b.output(b.max_pool2d(x, 5, 1, padding="VALID"))
    model = b.build()
    shapes = []
    for delegates in (None, [clgpu_delegate.load(partitioning="all")]):
        it = make_interpreter(model, delegates, runtime=runtime, reference=True)
        it.allocate_tensors()
        it.resize_tensor_input(it.get_input_details()[0]["index"], (1, 2, 2, 2))
        if op == "MAX_POOL_2D" and runtime == "ai_edge_litert":
            it.allocate_tensors()
            it.invoke()
            shapes.append(it.get_tensor(it.get_output_details()[0]["index"]).shape)
            continue
        with pytest.raises(RuntimeError, match="failed to prepare"):
            it.allocate_tensors()
    assert len(set(shapes)) <= 1, shapes


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("quantized", [False, True], ids=["float", "int8"])
def test_an_input_without_rows_is_refused_where_the_cpu_refuses_it(
    op: str, quantized: bool, runtime: str
) -> None:
    """A convolution whose input has no rows (a fuzzed model: a pool before it left none).
    LiteRT's kernels refuse it in Prepare, tflite_runtime 2.14's give an empty output: the
    delegate does as the runtime it runs in."""
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 4, 4, 4))
    if op == "CONV_2D":
        b.output(b.conv2d(x, b.rand((3, 1, 1, 4)), b.rand((3,))))
    else:
        b.output(b.depthwise_conv2d(x, b.rand((1, 1, 1, 4)), b.rand((4,))))
    model = quantize_model(b.build(), seed=1, io="int8") if quantized else b.build()
    outcomes = []
    for delegates in (None, [clgpu_delegate.load(partitioning="all")]):
        it = make_interpreter(model, delegates, runtime=runtime, reference=True)
        it.allocate_tensors()
        it.resize_tensor_input(it.get_input_details()[0]["index"], (1, 0, 4, 4))
        try:
            it.allocate_tensors()
            it.invoke()
            outcomes.append(("ran", it.get_tensor(it.get_output_details()[0]["index"]).shape))
        except RuntimeError as e:
            assert "failed to prepare" in str(e), e
            outcomes.append(("refused", None))
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][0] == ("refused" if runtime == "ai_edge_litert" else "ran")


def test_an_empty_depthwise_filter_is_left_to_the_cpu(runtime: str) -> None:
    """A depthwise filter with no columns (a fuzzed keyword-spotting model): LiteRT's kernel
    refuses it, tflite_runtime's gives an output; the CPU's kernel decides either way."""
    b = ModelBuilder(seed=3)
    b.output(b.depthwise_conv2d(b.input("x", (1, 4, 4, 2)), b.rand((1, 1, 1, 2)), padding="SAME"))
    w = b._ops[0].inputs[1]
    b._tensors[w].shape = (1, 1, 0, 2)
    b._tensors[w].data = np.zeros((1, 1, 0, 2), np.float32)
    d = clgpu_delegate.load(partitioning="all")
    make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    assert not d.decisions()[0].delegated
    assert d.decisions()[0].reason == "empty filter"
