"""cpu_warmup (runtime/cpu_fallback.h): a partition runs TFLite's own CPU kernels for the nodes it
replaced while its programs build on a setup thread, then the device from the first invoke after.
Every output is checked against the CPU reference: TFLite's kernels give the reference's own
numbers, the device its usual tolerance. $CLGPU_SETUP_DELAY_MS holds the setup thread, so the
invokes on the CPU happen whatever the process's program cache already holds.

Covered: several partitions, the default resolver (XNNPACK taking the nodes left on the CPU after
the delegate), int8, fp16 storage, a resize while the programs build, a setup that fails (the
partition stays on the CPU, with one warning), an interpreter freed while its partition builds,
shape computations (run once at prepare, so the RESHAPE or TRANSPOSE_CONV behind them is
static), a partition whose CPU kernels cannot run apart (a dynamic tensor: it builds before its
first invoke, as without the option), the plugin library's option string, and the public corpus's
trained models."""

from __future__ import annotations

import gc
import math
from typing import Any

import numpy as np
import pytest
from parity import FP32_RTOL, compare, cpu_op, precision_tolerances, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import interpreter_module, make_interpreter

HOLD = "CLGPU_SETUP_DELAY_MS"


def two_partitions(batch: int = 1) -> bytes:
    """conv, depthwise | CUMSUM | add, fully connected, transpose: two partitions."""
    b = ModelBuilder(seed=31)
    x = b.input("x", (batch, 10, 10, 3))
    y = b.conv2d(x, b.rand((8, 3, 3, 3)), b.rand((8,)), activation="RELU")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 8), scale=math.sqrt(2 / 9)), stride=2)
    y = cpu_op(b, y)
    y = b.add(y, b.rand((8,)))
    y = b.fully_connected(y, b.rand((6, 8)), keep_num_dims=True)
    b.output(b.transpose(y, (0, 3, 1, 2)))
    return b.build()


def one_partition() -> bytes:
    b = ModelBuilder(seed=32)
    x = b.input("x", (1, 12, 12, 8))
    y = b.conv2d(x, b.rand((16, 1, 1, 8)), b.rand((16,)), activation="RELU6")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 16)), b.rand((16,)), activation="RELU6")
    y = b.conv2d(y, b.rand((8, 1, 1, 16)), b.rand((8,)))
    b.output(b.add(y, x))
    return b.build()


def _reference(model: bytes, runtime: str, inputs: list[np.ndarray] | None = None) -> Any:
    ref = make_interpreter(model, runtime=runtime, reference=True, num_threads=1)
    ref.allocate_tensors()
    if inputs is None:
        inputs = random_inputs(ref.get_input_details())
    return inputs, run(ref, inputs)


def _warm(model: bytes, runtime: str, reference: bool = True, **options: Any) -> tuple[Any, Any]:
    d = clgpu_delegate.load(partitioning="all", cpu_warmup=True, **options)
    it = make_interpreter(model, [d], runtime=runtime, reference=reference, num_threads=1)
    it.allocate_tensors()
    return d, it


def _exact(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """TFLite's own kernels on the same inputs: the reference's numbers."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cpu_until_ready_then_device(runtime: str, precision: str, monkeypatch) -> None:
    model = two_partitions()
    inputs, want = _reference(model, runtime)
    monkeypatch.setenv(HOLD, "2000")
    d, it = _warm(model, runtime, precision=precision)
    s = d.stats()
    assert (s.warmups, s.warming, s.plans, s.binds) == (2, 2, 0, 0)
    for _ in range(3):
        _exact(run(it, inputs), want)
    s = d.stats()
    assert (s.cpu_invokes, s.invokes) == (6, 0)
    assert d.wait_ready(timeout=120)
    assert d.stats().warming == 0
    for _ in range(2):
        tol = precision_tolerances(precision)
        compare(run(it, inputs), want, tol["rtol"], tol.get("atol"), f"[{runtime}, {precision}]")
    s = d.stats()
    assert (s.cpu_invokes, s.invokes) == (6, 4)
    assert s.plans == 2  # the setup's plans; the switch re-binds only


def test_default_resolver_with_xnnpack(runtime: str, monkeypatch) -> None:
    """One partition kept (max_delegated_partitions=1): the interpreter's default delegate then
    takes the other's nodes, adding nodes after the delegate's own."""
    model = two_partitions()
    inputs, want = _reference(model, runtime)
    monkeypatch.setenv(HOLD, "1500")
    d, it = _warm(model, runtime, reference=False, max_delegated_partitions=1)
    assert len(d.partitions()) == 1
    for _ in range(2):
        compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert d.stats().cpu_invokes == 2
    assert d.wait_ready(timeout=120)
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert d.stats().invokes == 1


def test_int8(runtime: str, monkeypatch) -> None:
    model = quantize_model(one_partition(), io="int8", seed=3)
    inputs, want = _reference(model, runtime)
    monkeypatch.setenv(HOLD, "1500")
    d, it = _warm(model, runtime)
    _exact(run(it, inputs), want)
    assert d.stats().cpu_invokes == 1
    assert d.wait_ready(timeout=120)
    _exact(run(it, inputs), want)  # the int8 kernels are bit-exact too
    assert d.stats().invokes == 1


def test_resize_while_building(runtime: str, monkeypatch) -> None:
    monkeypatch.setenv(HOLD, "1000")
    d, it = _warm(two_partitions(), runtime)
    inputs, want = _reference(two_partitions(), runtime)
    _exact(run(it, inputs), want)
    # The prepare after the resize waits for the setup in flight, then plans the new shapes and
    # starts again: the CPU kernels run them meanwhile.
    it.resize_tensor_input(it.get_input_details()[0]["index"], [3, 10, 10, 3])
    it.allocate_tensors()
    inputs3, want3 = _reference(two_partitions(batch=3), runtime)
    _exact(run(it, inputs3), want3)
    assert d.stats().invokes == 0
    assert d.wait_ready(timeout=120)
    compare(run(it, inputs3), want3, FP32_RTOL, None, runtime)
    assert d.stats().invokes == 2


@pytest.mark.parametrize(
    ("scenario", "parts", "said"),
    [
        ("warmup_alloc", 1, ["clCreateBuffer", "CL_MEM_OBJECT_ALLOCATION_FAILURE"]),
        # With the option no probe build at prepare catches a device that cannot build first.
        ("warmup_build", 2, ["clgpu shim: injected build failure"]),  # the compiler's log
    ],
)
def test_failed_setup_stays_on_cpu(
    scenario: str, parts: int, said: list[str], runtime: str, shim_results: Any
) -> None:
    """A device setup that fails in the driver (an allocation, or every program build: the
    OpenCL shim, in a child process, faults/shim_warmup.py): without the option the prepare
    fails (or the probe keeps the model on the CPU); with it each partition keeps TFLite's
    kernels, says so once, and stays there when the driver works again."""
    r = shim_results(runtime)[scenario]
    assert "crashed" not in r and not r["leaked"], r
    assert r["ready"] and r["first"] == "ok", r  # TFLite's own numbers, three invokes
    want = {"cpu_invokes": 3 * parts, "invokes": 0, "warming": 0, "warmups": parts}
    assert r["stats"] == want, r
    err = r["stderr"]
    assert err.count("stays on TFLite's CPU kernels: its device setup failed") == parts, err
    for w in said:
        assert w in err, err


def test_freed_while_building(runtime: str, monkeypatch) -> None:
    """The interpreter goes while the setup thread holds: the partition cancels and joins it, and
    hands its tensors back before TFLite frees them."""
    monkeypatch.setenv(HOLD, "60000")
    model = one_partition()
    inputs, want = _reference(model, runtime)
    d, it = _warm(model, runtime)
    _exact(run(it, inputs), want)
    del it
    gc.collect()
    assert d.wait_ready(timeout=30)
    monkeypatch.delenv(HOLD)
    d2, it2 = _warm(model, runtime)
    assert d2.wait_ready(timeout=120)
    compare(run(it2, inputs), want, FP32_RTOL, None, runtime)


def _shape_chain(kind: str, batch: int) -> bytes:
    """A target computed from a shape at run time (SHAPE -> STRIDED_SLICE -> PACK), as TF's
    converter writes Keras' Flatten/Reshape and Conv2DTranspose with an unknown batch."""
    b = ModelBuilder(seed=33)
    x = b.input("x", (batch, 4, 4, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")
    if kind == "reshape":
        b.output(b.fully_connected(b.dynamic_reshape_flatten(y), b.rand((5, 64))))
    else:
        y = b.transpose_conv(y, b.rand((6, 3, 3, 4)), (8, 8), bias=b.rand((6,)), dynamic_batch=True)
        b.output(b.conv2d(y, b.rand((2, 1, 1, 6))))
    return b.build()


@pytest.mark.parametrize("kind", ["reshape", "transpose_conv"])
def test_shape_chain_warms_up(kind: str, runtime: str, monkeypatch) -> None:
    """The shape nodes run once at prepare into constants, so TFLite's RESHAPE and TRANSPOSE_CONV
    size their outputs at prepare (not dynamic) and the partition warms up; a resize runs the
    shape nodes again for the new batch."""
    monkeypatch.setenv(HOLD, "1500")
    d, it = _warm(_shape_chain(kind, 2), runtime)
    assert (d.stats().warmups, len(d.partitions())) == (1, 1)
    inputs, want = _reference(_shape_chain(kind, 2), runtime)
    _exact(run(it, inputs), want)
    it.resize_tensor_input(it.get_input_details()[0]["index"], [3, 4, 4, 3])
    it.allocate_tensors()
    inputs3, want3 = _reference(_shape_chain(kind, 3), runtime)
    _exact(run(it, inputs3), want3)
    assert (d.stats().cpu_invokes, d.stats().invokes) == (2, 0)
    assert d.wait_ready(timeout=120)
    compare(run(it, inputs3), want3, FP32_RTOL, None, runtime)
    assert d.stats().invokes == 1


def test_shape_from_outside_builds_first(runtime: str, monkeypatch) -> None:
    """A RESHAPE target the CPU computes outside the partition (the model also outputs it): TFLite's
    RESHAPE makes its output dynamic, which the fallback does not run, so that partition builds at
    prepare, as without the option; the other one warms up."""
    monkeypatch.setenv(HOLD, "60000")
    b = ModelBuilder(seed=33)
    x = b.input("x", (2, 4, 4, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")
    target = b.dynamic_flatten_target(y)
    b.output(b.fully_connected(b.dynamic_reshape_flatten(y, target), b.rand((5, 64))))
    b.output(target)
    model = b.build()
    inputs, want = _reference(model, runtime)
    d, it = _warm(model, runtime)
    assert (len(d.partitions()), d.stats().warmups) == (2, 1)
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert (d.stats().invokes, d.stats().cpu_invokes) == (1, 1)


def test_plugin_option(runtime: str, monkeypatch) -> None:
    model = one_partition()
    inputs, want = _reference(model, runtime)
    monkeypatch.setenv(HOLD, "1000")
    mod = interpreter_module(runtime)
    plugin = mod.load_delegate(
        clgpu_delegate.plugin_path(), {"cpu_warmup": "true", "partitioning": "all"}
    )
    it = make_interpreter(model, [plugin], runtime=runtime, reference=True, num_threads=1)
    it.allocate_tensors()
    _exact(run(it, inputs), want)  # on the CPU kernels: the setup thread holds


def test_option_value_checked() -> None:
    with pytest.raises(ValueError, match="cpu_warmup"):
        clgpu_delegate.load(cpu_warmup="sometimes")


# The corpus models the CPU reference runs as they are (oww_melspectrogram needs a resize first,
# selfie_segmentation a custom op the runtime lacks).
CORPUS_MODELS = [
    "audio_example1",
    "face_detection_back",
    "face_detection_short_range",
    "hand_landmark_lite",
    "iris_landmark",
    "keyword_spotting_alexa.float32",
    "keyword_spotting_mobilenetv2",
    "mww_okay_nabu",
    "oww_embedding_model",
    "palm_detection_lite",
    "pose_detection",
    "tflite_micro_speech",
]


@pytest.mark.parametrize("name", CORPUS_MODELS)
def test_public_corpus(name: str, runtime: str, monkeypatch, public_model) -> None:
    """Trained models (tests/public_models.py): every partition warms up, its CPU invokes give
    the reference's numbers, the device its own."""
    model = public_model(name).read_bytes()
    inputs, want = _reference(model, runtime)
    monkeypatch.setenv(HOLD, "3000")
    d, it = _warm(model, runtime)
    parts = len(d.partitions())
    _exact(run(it, inputs), want)
    s = d.stats()
    assert (s.warmups, s.cpu_invokes, s.invokes) == (parts, parts, 0)
    assert d.wait_ready(timeout=300)
    compare(run(it, inputs), want, FP32_RTOL, None, f"[{runtime}, {name}]")
    assert d.stats().invokes == parts
