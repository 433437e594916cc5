"""Cost-aware partitioning: the default leaves on the CPU what would not win. On a CPU
OpenCL device (PoCL) that is everything; `inspect` shows the decision and its numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest
from estimates import estimate_text, small_layers
from parity import random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.modelgen._layers import start
from clgpu_delegate.modelgen._ptq import quantize_model
from clgpu_delegate.report import format_report, inspect_model
from clgpu_delegate.runtime import make_interpreter


def test_cost_declines_on_a_cpu_device_and_output_is_unchanged(runtime: str) -> None:
    delegate = clgpu_delegate.load(partitioning="cost")
    if delegate.device.type == "gpu":
        pytest.skip("this checks the CPU-device rule; a GPU may rightly claim the model")
    model = zoo.build("mobilenet_v2")
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    assert delegate.delegated_nodes() == []
    reasons = {d.reason for d in delegate.decisions() if d.op_name == "CONV_2D"}
    assert reasons and all(r.startswith("cost:") for r in reasons), reasons
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), 0)
    np.testing.assert_array_equal(run(interp, inputs)[0], run(ref, inputs)[0])


def test_all_claims_what_cost_declines(runtime: str) -> None:
    model = zoo.build("lenet5")
    claimed = clgpu_delegate.load(partitioning="all")
    make_interpreter(model, [claimed], runtime=runtime, reference=True)
    assert claimed.delegated_nodes(), claimed.decisions()


def test_default_is_cost_without_the_test_override(run_python) -> None:
    out = run_python(
        "import clgpu_delegate\n"
        "from clgpu_delegate.modelgen import zoo\n"
        "from clgpu_delegate.runtime import available_runtimes, make_interpreter\n"
        "d = clgpu_delegate.load()\n"
        "make_interpreter(zoo.build('lenet5'), [d], reference=True)\n"
        "print(d.device.type, len(d.delegated_nodes()),"
        " sum(r.reason.startswith('cost:') for r in d.decisions()))\n",
        env={"CLGPU_PARTITIONING": None},
    )
    assert out.returncode == 0, out.stderr
    dev_type, delegated, cost_reasons = out.stdout.split()
    if dev_type == "cpu":
        assert int(delegated) == 0 and int(cost_reasons) > 0, out.stdout


def test_inspect_shows_cost_decisions() -> None:
    report = inspect_model(zoo.build("lenet5"), partitioning="cost")
    text = format_report(report)
    if report.partitions:
        pytest.skip("the device claims lenet5; nothing declined to show")
    assert "cost:" in text and ("MFLOP" in text or "CPU itself" in text), text


def _device_estimate(model: bytes) -> tuple[float, int, float]:
    """(device ms, kernels, us per kernel) of the estimate."""
    text = estimate_text(model)
    m = re.search(r"estimated ([0-9.]+) ms on the device \((\d+) kernels\)", text)
    k = re.search(r"device: ([0-9.]+) us/kernel", text)
    assert m and k, text
    return float(m.group(1)), int(m.group(2)), float(k.group(1))


def test_the_layer_extras_tune_moves_each_kernel_by_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CLGPU_COST_TUNE's third value replaces the 2 us a layer's kernel costs over the
    calibration's (bench/cost_estimates.py --tunes weighs it): the estimate moves by exactly
    that per kernel, and the default's value is 2."""
    model = small_layers(6)
    base_ms, kernels, base_us = _device_estimate(model)
    monkeypatch.setenv("CLGPU_COST_TUNE", "2,0.95,2")
    assert _device_estimate(model) == (base_ms, kernels, base_us)
    monkeypatch.setenv("CLGPU_COST_TUNE", "2,0.95,0")
    ms, k, us = _device_estimate(model)
    assert k == kernels and us == pytest.approx(base_us - 2, abs=0.051)
    assert ms == pytest.approx(base_ms - kernels * 2e-3, abs=2e-3)


KINDS = r"kernels: (\d+) gemm, (\d+) fused, (\d+) split, (\d+) small, ([a-z ]+), ([0-9.]+) us gap"


def _kinds(text: str) -> tuple[list[int], str, float]:
    """The estimate's launches per kind (gemm, fused, split, small), how it costed them and
    the gap it counted after each."""
    m = re.search(KINDS, text)
    assert m, text
    return [int(m.group(i)) for i in range(1, 5)], m.group(5), float(m.group(6))


def _kinds_net() -> bytes:
    """Tiny layers of each kind but a split's: a depthwise folded into the next 1x1 (fused), a
    max pool (small), a 3x3 conv (gemm), each far below a launch's cost in arithmetic."""
    net, x = start(6, 8, seed=0, fp16_weights=False)
    x = net.b.max_pool2d(net.conv(net.dwconv(x, 3), 8, 1, act=None), 2, 2)
    return net.finish(net.conv(x, 8, 3, act=None), softmax=False)


def test_launch_costs_by_kind_replace_the_calibrated_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the device profile (or $CLGPU_LAUNCH_US) has a cost per launch kind, the estimate
    counts each launch at its kind's cost, with no gap on top and no calibrated figure: raising
    one kind's cost by 1 us moves the estimate by exactly that kind's launches. "0,0,0,0" keeps
    the calibration's one figure, as a device without the profile's costs does (PoCL)."""
    model = _kinds_net()
    base = estimate_text(model)
    counts, costing, gap = _kinds(base)
    ms, kernels, _ = _device_estimate(model)
    assert costing == "one cost" and gap > 0 and sum(counts) == kernels, base
    assert counts[0] >= 1 and counts[1] >= 1 and counts[3] >= 1, base
    monkeypatch.setenv("CLGPU_LAUNCH_US", "0,0,0,0")
    assert estimate_text(model) == base
    costs = [8.0, 10.0, 4.5, 6.0]
    monkeypatch.setenv("CLGPU_LAUNCH_US", ",".join(map(str, costs)))
    text = estimate_text(model)
    by_kind, costing, gap = _kinds(text)
    by_kind_ms, _, per_kernel = _device_estimate(model)
    assert by_kind == counts and costing == "costs by kind" and gap == 0, text
    mean_us = sum(c * n for c, n in zip(costs, counts, strict=True)) / kernels
    assert per_kernel == pytest.approx(mean_us, abs=0.051)
    for kind in range(4):
        if not counts[kind]:
            continue
        more = list(costs)
        more[kind] += 1
        monkeypatch.setenv("CLGPU_LAUNCH_US", ",".join(map(str, more)))
        moved_ms = _device_estimate(model)[0]
        assert moved_ms == pytest.approx(by_kind_ms + counts[kind] * 1e-3, abs=1.5e-3), kind


def _int8_conv(size: int, channels: int) -> bytes:
    """float input, QUANTIZE, an int8 1x1 conv, DEQUANTIZE, float output."""
    net, x = start(size, channels, seed=0, fp16_weights=False)
    return quantize_model(net.finish(net.conv(x, 8, 1), softmax=False))


EDGE = "cost: a conversion at the model's edge"


def test_small_edge_conversions_of_an_int8_model_stay_on_the_cpu(runtime: str) -> None:
    """An int8 model's float input is quantized, and its output dequantized, by a node each: at
    the model's edge a small one costs the device a launch where the CPU converts it in less,
    and the partition then moves the int8 values. A large image's stays with the device, and
    `all` claims both."""
    model = _int8_conv(7, 96)
    delegate = clgpu_delegate.load(partitioning="cost")
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    reasons = {d.op_name: d.reason for d in delegate.decisions()}
    assert not reasons["CONV_2D"].startswith(EDGE), reasons
    if delegate.device.type != "gpu":
        # The constants (a 9.5 us kernel): both conversions, 24 KB and 2 KB, go to the CPU.
        assert reasons["QUANTIZE"].startswith(EDGE), reasons
        assert reasons["DEQUANTIZE"].startswith(EDGE), reasons
    for op in ("QUANTIZE", "DEQUANTIZE"):  # a GPU's calibrated kernel may cost less
        if reasons[op].startswith(EDGE):
            m = re.search(r"about ([0-9.]+) us on the CPU against ([0-9.]+) us", reasons[op])
            assert m and float(m.group(1)) < float(m.group(2)), reasons[op]
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), 0)
    np.testing.assert_array_equal(run(interp, inputs)[0], run(ref, inputs)[0])

    large = clgpu_delegate.load(partitioning="cost")
    make_interpreter(_int8_conv(224, 3), [large], runtime=runtime, reference=True)
    assert not any(d.reason.startswith(EDGE) for d in large.decisions()), large.decisions()
    everything = clgpu_delegate.load(partitioning="all")
    make_interpreter(model, [everything], runtime=runtime, reference=True)
    assert len(everything.delegated_nodes()) == 3, everything.decisions()


def _launches_per_invoke(model: bytes, skip_ops: frozenset[str] = frozenset()) -> int:
    delegate = clgpu_delegate.load(partitioning="all", profiling=True)
    interp = make_interpreter(model, [delegate], reference=True)
    interp.allocate_tensors()
    delegate.wait_ready()
    run(interp, random_inputs(interp.get_input_details(), 0))
    delegate.reset_profile()
    run(interp, random_inputs(interp.get_input_details(), 1))
    return sum(k.count for k in delegate.profile().kernels if k.op not in skip_ops)


def _conv_net(kind: str) -> bytes:
    if kind == "winograd":  # 3x3, 32 channels on 21x21: input transform, GEMM, output transform
        net, x = start(21, 32, seed=0, fp16_weights=False)
        return net.finish(net.conv(x, 32, 3, act=None), softmax=False)
    if kind == "small_map":  # 3x3 stride 2 on 8x8 at 128 channels: few output tiles, long K
        net, x = start(8, 128, seed=0, fp16_weights=False)
        return net.finish(net.conv(x, 128, 3, stride=2, act=None), softmax=False)
    if kind == "squeeze_int8":
        return quantize_model(_conv_net("squeeze"))
    if kind.startswith("squeeze"):  # a squeeze-excite block: the MEAN's kernel runs both 1x1s
        net, x = start(7, 96, seed=0, fp16_weights=False)
        s = net.b.mean(x, (1, 2), keep_dims=True)
        s = net.conv(s, 24, 1, act=None if kind == "squeeze_swish" else "RELU")
        if kind == "squeeze_swish":  # EfficientNet's: x * sigmoid(x), folded into the conv
            s = net.b.mul(s, net.b.logistic(s))
        s = net.b.logistic(net.conv(s, 96, 1, act=None))
        return net.finish(net.b.mul(x, s), softmax=False)
    if kind == "split_mean":  # a global MEAN over a large map: slices, then their sum
        net, x = start(40, 16, seed=0, fp16_weights=False)
        return net.finish(net.b.mean(net.conv(x, 16, 1), (1, 2), keep_dims=True), softmax=False)
    if kind == "split_op":  # SPLIT: a copy per output (AlexNet's grouped convolutions)
        net, x = start(9, 24, seed=0, fp16_weights=False)
        parts = net.b.split(x, 3, 3)
        return net.finish(net.b.concat([net.conv(p, 8, 3) for p in parts], 3), softmax=False)
    net, x = start(14, 64, seed=0, fp16_weights=False)  # depthwise into a 1x1: one GEMM
    x = net.conv(net.dwconv(x, 3), 256, 1, act=None)
    return net.finish(net.conv(net.dwconv(net.conv(x, 64, 1), 3, stride=2), 512, 1), softmax=False)


@pytest.mark.parametrize(
    "kind",
    [
        "winograd",
        "small_map",
        "folded_depthwise",
        "squeeze",
        "squeeze_swish",
        "squeeze_int8",
        "split_mean",
        "split_op",
    ],
)
def test_the_estimate_counts_the_kernels_the_partition_launches(kind: str) -> None:
    """The cost model's kernel count comes from the plans the ops make on this device (split-K
    GEMMs and Winograd launch several kernels; a depthwise folded into a 1x1, or a squeeze's
    dense ops folded into its MEAN, none of their own): it must equal what the partition
    launches per invoke."""
    model = _conv_net(kind)
    estimated = int(re.search(r"\((\d+) kernels\)", estimate_text(model)).group(1))
    # The int8 model's QUANTIZE and DEQUANTIZE at its edge stay on the CPU by default, outside
    # the estimated partition; `all` claims them.
    cost = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [cost], reference=True).allocate_tensors()
    edge = frozenset(d.op_name for d in cost.decisions() if d.reason.startswith(EDGE))
    assert estimated == _launches_per_invoke(model, edge)
    assert sum(_kinds(estimate_text(model))[0]) == estimated


@pytest.mark.parametrize(
    "sides,cpu_ops", [("0", set()), ("1", {"QUANTIZE"}), ("2", {"DEQUANTIZE"})]
)
def test_edge_knob_picks_which_conversions_may_stay_on_the_cpu(
    runtime: str, monkeypatch: pytest.MonkeyPatch, sides: str, cpu_ops: set[str]
) -> None:
    """$CLGPU_EDGE_CPU (research, bench/ab_options.py): 1 the input's conversion, 2 the
    output's, 0 neither; a malformed value fails the prepare with a one-line error."""
    monkeypatch.setenv("CLGPU_EDGE_CPU", sides)
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(_int8_conv(7, 96), [delegate], runtime=runtime, reference=True)
    edge = {d.op_name for d in delegate.decisions() if d.reason.startswith(EDGE)}
    if delegate.device.type != "gpu":  # the constants: both would stay on the CPU
        assert edge == cpu_ops, delegate.decisions()
    assert edge <= cpu_ops
    monkeypatch.setenv("CLGPU_EDGE_CPU", "4")
    with pytest.raises(Exception, match="CLGPU_EDGE_CPU must be 0, 1, 2 or 3"):
        make_interpreter(
            _int8_conv(7, 96),
            [clgpu_delegate.load(partitioning="cost")],
            runtime=runtime,
            reference=True,
        ).allocate_tensors()


def test_an_invoke_costs_the_profiles_figure_beside_the_launch_kinds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With costs by launch kind (the device profile's, or $CLGPU_LAUNCH_US) the estimate adds
    the cost of an invoke fitted with them ($CLGPU_INVOKE_US replaces the profile's): 20 us
    more moves the device estimate by 0.020 ms and the figures name it. With the calibration's
    one figure it adds nothing: the calibrated sync already is the invoke's."""
    model = _kinds_net()
    monkeypatch.setenv("CLGPU_LAUNCH_US", "8,10,4.5,6")
    times = {}
    for us in ("0", "20"):
        monkeypatch.setenv("CLGPU_INVOKE_US", us)
        times[us] = _device_estimate(model)[0]
        assert f"{float(us):.1f} us invoke" in estimate_text(model)
    assert times["20"] - times["0"] == pytest.approx(0.020, abs=1.5e-3), times
    monkeypatch.setenv("CLGPU_LAUNCH_US", "0,0,0,0")
    one_cost = _device_estimate(model)[0]
    assert "0.0 us invoke" in estimate_text(model)
    monkeypatch.setenv("CLGPU_INVOKE_US", "0")
    assert _device_estimate(model)[0] == one_cost


@pytest.mark.parametrize("signature", [(1, -1, 16), (-1, 12, 16)], ids=["frames", "batch"])
def test_run_time_extents_are_named_and_kept(signature: tuple[int, ...], runtime: str) -> None:
    # tf.signal's frames: the model declares 1 where the run has hundreds, so the estimate weighs
    # placeholders; a GPU keeps such a partition whatever it says (a CPU device still declines).
    # A -1 batch axis alone is every Keras model's and changes nothing.
    b = ModelBuilder(seed=3)
    # Declared with 1 where the signature has -1, as converters write it.
    x = b.input("frames", tuple(max(d, 1) for d in signature), signature=signature)
    b.output(b.fully_connected(b.relu(x), b.rand((8, 16)), keep_num_dims=True))
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(b.build(), [delegate], runtime=runtime, reference=True).allocate_tensors()
    texts = " ".join(d.reason + " " + d.note for d in delegate.decisions())
    named = "frames has extents the run decides" in texts
    assert named == (signature[1] == -1), texts
    if delegate.device.type == "gpu" and named:
        assert delegate.delegated_nodes(), delegate.decisions()
