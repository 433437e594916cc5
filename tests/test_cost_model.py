"""Cost-aware partitioning: the default leaves on the CPU what would not win. On a CPU
OpenCL device (PoCL) that is everything; `inspect` shows the decision and its numbers."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from parity import random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import dynamic_range_model, zoo
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


def _estimate(model: bytes) -> str:
    """The cost model's estimate for a one-partition model, in words: on a CPU device the
    decline's reason names the figures, on a GPU a kept partition's note."""
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [delegate], reference=True).allocate_tensors()
    texts = {d.reason + " " + d.note for d in delegate.decisions()}
    texts = {t for t in texts if "kernels)" in t}
    assert len(texts) == 1, texts
    return texts.pop()


def _cpu_estimate_ms(model: bytes) -> tuple[float, float]:
    """(CPU ms, MFLOP) of the estimate."""
    m = re.search(r"vs ([0-9.]+) ms on the CPU .*?; ([0-9.]+) MFLOP", _estimate(model))
    assert m
    return float(m.group(1)), float(m.group(2))


def _one_layer(kind: str) -> bytes:
    if kind == "fc":  # 2 FLOP per 4-byte weight: the weights' traffic sets the CPU's time
        net, x = start((1, 1), 2048, seed=0, fp16_weights=False)
        return net.finish(net.fc(net.b.reshape(x, (1, 2048)), 2048, act=None), softmax=False)
    net, x = start(21, 32, seed=0, fp16_weights=False)  # ~600 FLOP per byte moved
    return net.finish(net.conv(x, 32, 3, act=None), softmax=False)


def test_the_cpu_estimate_charges_memory_traffic_not_only_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """XNNPACK's time for a layer that moves more bytes than it computes (a wide FC's weights,
    a depthwise conv) is set by the bytes: the CPU estimate of an FC with ~the FLOPs of a 3x3
    conv must be several times the conv's, not the same (MobileNetV3's layers were
    estimated 1.5-2x too fast by FLOPs alone). Weights from DRAM: no cache holds them."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    fc_ms, fc_mflop = _cpu_estimate_ms(_one_layer("fc"))
    conv_ms, conv_mflop = _cpu_estimate_ms(_one_layer("conv"))
    assert 0.9 < fc_mflop / conv_mflop < 1.2, (fc_mflop, conv_mflop)
    assert fc_ms > 3 * conv_ms, (fc_ms, conv_ms)


def test_the_cpu_reads_a_models_weights_from_its_cache_when_they_all_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dense layer of 16 MB in a host cache of 64 MB streams its weights faster than from
    DRAM (the H200 host's 16 threads: 400-610 GB/s against 208), so its CPU estimate drops and
    says why; a cache of 8 MB, or none known, changes nothing; a bad size is a clear error."""
    model = _one_layer("fc")
    times, texts = {}, {}
    for mb in ("0", "8", "64"):
        monkeypatch.setenv("CLGPU_CPU_CACHE_MB", mb)
        texts[mb] = _estimate(model)
        times[mb] = _cpu_estimate_ms(model)[0]
    assert times["8"] == times["0"], times
    assert times["64"] < 0.75 * times["0"], times
    assert "the CPU's weights in its cache" in texts["64"], texts["64"]
    assert not any("in its cache" in texts[mb] for mb in ("0", "8")), texts
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "-1")
    with pytest.raises(RuntimeError, match="CLGPU_CPU_CACHE_MB must be a size in MB"):
        delegate = clgpu_delegate.load(partitioning="cost")
        make_interpreter(model, [delegate], reference=True).allocate_tensors()


def test_a_float_mirror_pad_costs_tflites_own_kernel_on_the_cpu() -> None:
    """XNNPACK takes no MIRROR_PAD: TFLite's kernel runs it at several ns per element (16 on
    one thread of the H200's host), which the roofline of a PAD's bytes misses by 40x. The CPU
    estimate of a float MIRROR_PAD exceeds that of the same PAD by its elements at 8 ns."""
    est = {}
    for op in ("pad", "mirror_pad"):
        net, x = start((64, 80), 32, seed=0, fp16_weights=False)
        y = getattr(net.b, op)(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
        est[op] = _cpu_estimate_ms(net.finish(y, softmax=False))[0]
    expected_ms = 66 * 82 * 32 * 8e-6
    assert 0.9 < (est["mirror_pad"] - est["pad"]) / expected_ms < 1.05, (est, expected_ms)


def test_dynamic_range_weights_cost_the_cpu_its_hybrid_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TFLite runs a dynamic-range DEPTHWISE_CONV_2D in its hybrid kernel, not XNNPACK: 40 us a
    node and 2.8 ns an output element on the CPU side, over its float form's estimate; a
    dynamic-range FC reads its int8 weights, a byte each, where the float one reads four."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    net, x = start(56, 64, seed=0, fp16_weights=False)
    dw = net.finish(net.dwconv(x, 3, 1, act=None), softmax=False)
    float_ms = _cpu_estimate_ms(dw)[0]
    hybrid_ms = _cpu_estimate_ms(dynamic_range_model(dw))[0]
    expected_ms = 0.040 + 56 * 56 * 64 * 2.8e-6
    assert 0.9 < (hybrid_ms - float_ms) / expected_ms < 1.1, (float_ms, hybrid_ms, expected_ms)
    fc = _one_layer("fc")  # 16 MB of float weights: their bytes set its CPU time
    fc_float_ms = _cpu_estimate_ms(fc)[0]
    fc_hybrid_ms = _cpu_estimate_ms(dynamic_range_model(fc))[0]
    assert fc_hybrid_ms < 0.4 * fc_float_ms, (fc_float_ms, fc_hybrid_ms)


def _int8_after_conv(op: str, channels: int = 64) -> bytes:
    """An int8 1x1 conv on a 56 x 56 map, then `op`: 'avg' / 'max' (2x2 pools), 'softmax',
    'dw1' / 'dw2' (3x3 depthwise with depth multiplier 1 / 2)."""
    from clgpu_delegate.modelgen import ModelBuilder

    b = ModelBuilder(seed=0)
    x = b.input("x", (1, 56, 56, 64))
    y = b.conv2d(x, b.rand((channels, 1, 1, 64)), b.rand((channels,), 0.1), 1, 1, "SAME")
    if op in ("avg", "max"):
        y = getattr(b, f"{op}_pool2d")(y, 2, 2)
    elif op == "softmax":
        y = b.softmax(y)
    elif op in ("dw1", "dw2"):
        m = int(op[-1])
        c = channels * m
        y = b.depthwise_conv2d(y, b.rand((1, 3, 3, c)), b.rand((c,), 0.1), depth_multiplier=m)
    b.output(y)
    return quantize_model(b.build(), io="int8")


def test_int8_forms_xnnpack_leaves_cost_tflites_own_kernels(
    monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    """XNNPACK takes no int8 AVERAGE_POOL_2D or SOFTMAX, nor an int8 depthwise conv with a depth
    multiplier: TFLite's own kernels run them at 5.3 and 3.7 ns an output element and (at 16
    threads) 0.54 ns a pixel x input channel x tap (H200 host), far over XNNPACK's roofline. At
    the fit's 16 threads the CPU estimate of each exceeds that of a form XNNPACK takes
    (MAX_POOL_2D, the conv alone, depth multiplier 1 over as many output channels) by that
    kernel's time."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    ms = {op: _cpu_estimate_at(_int8_after_conv(op), 16, runtime)[0] for op in ("max", "avg")}
    expected = 28 * 28 * 64 * 5.3e-6
    assert 0.9 < (ms["avg"] - ms["max"]) / expected < 1.1, (ms, expected)
    base = _cpu_estimate_at(_int8_after_conv(""), 16, runtime)[0]
    soft = _cpu_estimate_at(_int8_after_conv("softmax"), 16, runtime)[0]
    assert 0.9 < (soft - base) / (56 * 56 * 64 * 3.7e-6) < 1.1, (base, soft)
    dw1 = _cpu_estimate_at(_int8_after_conv("dw1", 64), 16, runtime)[0]
    dw2 = _cpu_estimate_at(_int8_after_conv("dw2", 32), 16, runtime)[0]
    expected = 56 * 56 * 32 * 9 * 0.54e-6
    assert 0.85 < (dw2 - dw1) / expected < 1.1, (dw1, dw2, expected)


def _cpu_estimate_at(model: bytes, threads: int | None, runtime: str) -> tuple[float, int]:
    """(CPU ms, threads) of the estimate for an interpreter given `threads` (None: unset)."""
    delegate = clgpu_delegate.load(partitioning="cost")
    make_interpreter(
        model, [delegate], runtime=runtime, num_threads=threads, reference=True
    ).allocate_tensors()
    texts = {d.reason + " " + d.note for d in delegate.decisions()}
    pattern = r"vs ([0-9.]+) ms on the CPU \(\d+ nodes, (\d+) threads;"
    found = {m.groups() for t in texts if (m := re.search(pattern, t))}
    assert len(found) == 1, texts
    ms, threads_seen = found.pop()
    return float(ms), int(threads_seen)


def _device_estimate(model: bytes) -> tuple[float, int, float]:
    """(device ms, kernels, us per kernel) of the estimate."""
    text = _estimate(model)
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
    model = _small_layers(6)
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
    base = _estimate(model)
    counts, costing, gap = _kinds(base)
    ms, kernels, _ = _device_estimate(model)
    assert costing == "one cost" and gap > 0 and sum(counts) == kernels, base
    assert counts[0] >= 1 and counts[1] >= 1 and counts[3] >= 1, base
    monkeypatch.setenv("CLGPU_LAUNCH_US", "0,0,0,0")
    assert _estimate(model) == base
    costs = [8.0, 10.0, 4.5, 6.0]
    monkeypatch.setenv("CLGPU_LAUNCH_US", ",".join(map(str, costs)))
    text = _estimate(model)
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


def _small_layers(count: int) -> bytes:
    """Layers so small that each node's hand-off between XNNPACK's threads is their CPU time."""
    net, x = start(4, 8, seed=0, fp16_weights=False)
    for _ in range(count):
        x = net.conv(x, 8, 1, act=None)
    return net.finish(x, softmax=False)


def test_the_cpu_estimate_is_for_the_interpreters_threads(runtime: str) -> None:
    """XNNPACK runs on the threads the interpreter gives it: one, without a pool, when the user
    sets none (tflite_runtime passes -1, ai_edge_litert 1), at most the host's cores. Fewer
    threads hand each node off faster (1.88 us on one thread against 2.03 + 0.186 x 2 on two,
    in the sweep's figures): small layers' CPU estimate is lower on one thread, by about their
    ratio. A compute-bound layer is never estimated slower than on the 16 threads of the fit
    (the sweep's one-thread arithmetic missed small models by up to 5x either way)."""
    cores = os.cpu_count() or 1
    small = _small_layers(40)
    unset_ms, unset_threads = _cpu_estimate_at(small, None, runtime)
    one_ms, one_threads = _cpu_estimate_at(small, 1, runtime)
    assert unset_threads == one_threads == 1
    assert unset_ms == pytest.approx(one_ms)
    _, many_threads = _cpu_estimate_at(small, cores + 8, runtime)
    assert many_threads == cores
    sixteen_ms = 40 * 8.0e-3  # the 16-thread fit's hand-off of 40 float convolutions
    assert one_ms < 0.5 * sixteen_ms, one_ms
    conv = _one_layer("conv")
    conv_one_ms, _ = _cpu_estimate_at(conv, 1, runtime)
    if cores >= 2:
        two_ms, two_threads = _cpu_estimate_at(small, 2, runtime)
        assert two_threads == 2
        assert 0.7 < one_ms / two_ms < 0.85, (one_ms, two_ms)
        conv_two_ms, _ = _cpu_estimate_at(conv, 2, runtime)
        assert conv_one_ms < 1.2 * conv_two_ms, (conv_one_ms, conv_two_ms)


def _small_adds(count: int) -> bytes:
    """As _small_layers, with ADDs of a constant for the convolutions."""
    net, x = start(4, 8, seed=0, fp16_weights=False)
    for _ in range(count):
        x = net.b.add(x, net.b.rand((1, 1, 8)))
    return net.finish(x, softmax=False)


def test_a_convolution_hands_off_longer_than_an_element_wise_op(runtime: str) -> None:
    """XNNPACK hands a float convolution between its threads in about 8 us on the H200's host
    (16 threads), an int8 one in 6, an ADD in 2 (bench/results/cpu-handoff-NVIDIA_H200.md):
    with one figure for every node (4.7 us) float keyword spotters came out 20-30 % too fast
    on the CPU and int8 ones right. Layers too small for their arithmetic to count cost the
    CPU those hand-offs, in about those ratios, on any thread count (the int8 model's ratio a
    little under 8 / 6: its arithmetic and edge conversions add to the hand-offs)."""
    convs_ms, threads = _cpu_estimate_at(_small_layers(40), 16, runtime)
    adds_ms, _ = _cpu_estimate_at(_small_adds(40), 16, runtime)
    int8_ms, _ = _cpu_estimate_at(quantize_model(_small_layers(40)), 16, runtime)
    assert 3.5 < convs_ms / adds_ms < 4.1, (convs_ms, adds_ms, threads)
    assert 1.1 < convs_ms / int8_ms < 1.34, (convs_ms, int8_ms, threads)


def _activated(act: str, int8: bool) -> bytes:
    """A 1x1 conv to 56 x 56 x 64 and an activation; int8 through quantize_model."""
    net, x = start(56, 16, seed=0, fp16_weights=False)
    y = getattr(net.b, act)(net.conv(x, 64, 1, act=None))
    model = net.finish(y, softmax=False)
    return quantize_model(model) if int8 else model


def test_int8_ops_xnnpack_leaves_to_tflite_cost_the_cpu_their_own_kernel() -> None:
    """XNNPACK takes no int8 HARD_SWISH or RELU standing alone: TFLite's own kernel runs them,
    about 6 and 16 ns per element on one thread of the H200's host, where XNNPACK's LOGISTIC
    takes 0.1 (keras_mobilenet_v3_large_int8 ran 5-9x slower on the CPU than its float form,
    where the estimate had it 1.4x faster). 200,704 elements add about 1.2 and 3.2 ms over a
    LOGISTIC; in float, XNNPACK's roofline stays."""
    logistic_ms = _cpu_estimate_ms(_activated("logistic", True))[0]
    hard_swish_ms = _cpu_estimate_ms(_activated("hard_swish", True))[0]
    relu_ms = _cpu_estimate_ms(_activated("relu", True))[0]
    assert 1.1 < hard_swish_ms - logistic_ms < 1.3, (hard_swish_ms, logistic_ms)
    assert 3.0 < relu_ms - logistic_ms < 3.4, (relu_ms, logistic_ms)
    float_ms = [_cpu_estimate_ms(_activated(a, False))[0] for a in ("logistic", "hard_swish")]
    assert abs(float_ms[0] - float_ms[1]) < 0.05, float_ms


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
    estimated = int(re.search(r"\((\d+) kernels\)", _estimate(model)).group(1))
    # The int8 model's QUANTIZE and DEQUANTIZE at its edge stay on the CPU by default, outside
    # the estimated partition; `all` claims them.
    cost = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [cost], reference=True).allocate_tensors()
    edge = frozenset(d.op_name for d in cost.decisions() if d.reason.startswith(EDGE))
    assert estimated == _launches_per_invoke(model, edge)
    assert sum(_kinds(_estimate(model))[0]) == estimated


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


def _int8_conv_3x3(hw: int, channels: int) -> bytes:
    """One int8 3x3 convolution from `channels` to 16, int8 in and out: one partition."""
    from clgpu_delegate.modelgen import ModelBuilder

    b = ModelBuilder(seed=0)
    x = b.input("x", (1, hw, hw, channels))
    b.output(b.conv2d(x, b.rand((16, 3, 3, channels)), b.rand((16,), 0.1)))
    return quantize_model(b.build(), io="int8")


def test_int8_convolutions_on_amx_tiles_cost_by_pixel_not_by_multiply_add(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where XNNPACK runs int8 convolutions on AMX tiles (CLGPU_CPU_INT8_TILES=1, else the
    host's CPUID), a convolution's CPU time follows its output pixels and filter taps, whatever
    its input channels (bench/results/cpu-int8-conv-*.md: a 3x3 from one channel ran 4x its
    float form's time). Without tiles the roofline counts multiply-adds: 16 input channels cost
    more than one. A bad value is a clear error."""
    est = {}
    for tiles in ("0", "1"):
        monkeypatch.setenv("CLGPU_CPU_INT8_TILES", tiles)
        for hw, c in ((64, 1), (64, 16), (128, 1)):
            est[tiles, hw, c] = _cpu_estimate_ms(_int8_conv_3x3(hw, c))[0]
    assert est["0", 64, 16] > est["0", 64, 1], est
    assert est["1", 64, 1] > 2 * est["0", 64, 1], est
    assert est["1", 64, 16] == pytest.approx(est["1", 64, 1], rel=0.15), est
    assert 3 < est["1", 128, 1] / est["1", 64, 1] < 4.5, est
    monkeypatch.setenv("CLGPU_CPU_INT8_TILES", "2")
    with pytest.raises(RuntimeError, match="CLGPU_CPU_INT8_TILES must be 0 or 1"):
        _estimate(_int8_conv_3x3(64, 1))


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
        assert f"{float(us):.1f} us invoke" in _estimate(model)
    assert times["20"] - times["0"] == pytest.approx(0.020, abs=1.5e-3), times
    monkeypatch.setenv("CLGPU_LAUNCH_US", "0,0,0,0")
    one_cost = _device_estimate(model)[0]
    assert "0.0 us invoke" in _estimate(model)
    monkeypatch.setenv("CLGPU_INVOKE_US", "0")
    assert _device_estimate(model)[0] == one_cost


def test_int8_prelu_costs_the_cpu_tflites_own_kernel() -> None:
    """XNNPACK takes no int8 PRELU: TFLite's own kernel runs it on one thread, about 10 ns an
    element on the H200's host (12 ms for 128 x 128 x 64), so the CPU estimate of a conv and a
    PRELU over 200,704 elements is about 2 ms over the conv and a LOGISTIC; in float, XNNPACK's
    roofline stays."""
    logistic_ms = _cpu_estimate_ms(_activated("logistic", True))[0]

    def prelu(int8: bool) -> bytes:
        net, x = start(56, 16, seed=0, fp16_weights=False)
        y = net.conv(x, 64, 1, act=None)
        model = net.finish(net.b.prelu(y, np.full((1, 1, 64), 0.2, np.float32)), softmax=False)
        return quantize_model(model) if int8 else model

    prelu_ms = _cpu_estimate_ms(prelu(True))[0]
    assert 1.9 < prelu_ms - logistic_ms < 2.1, (prelu_ms, logistic_ms)
    float_gap = (
        _cpu_estimate_ms(prelu(False))[0] - _cpu_estimate_ms(_activated("logistic", False))[0]
    )
    assert abs(float_gap) < 0.05, float_gap
