"""The cost model's CPU side (src_cpp/delegate/cpu_costs.cc): XNNPACK's roofline per node, its
hand-off between threads by kind of node, the interpreter's threads, and the ops XNNPACK leaves
to TFLite's own kernels, read back from the estimate `decisions()` words."""

from __future__ import annotations

import os

import numpy as np
import pytest
from estimates import cpu_estimate_at, cpu_estimate_ms, estimate_text, one_layer, small_layers

import clgpu_delegate
from clgpu_delegate.modelgen import dynamic_range_model
from clgpu_delegate.modelgen._layers import start
from clgpu_delegate.modelgen._ptq import quantize_model
from clgpu_delegate.runtime import make_interpreter


def test_the_cpu_estimate_charges_memory_traffic_not_only_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """XNNPACK's time for a layer that moves more bytes than it computes (a wide FC's weights,
    a depthwise conv) is set by the bytes: the CPU estimate of an FC with ~the FLOPs of a 3x3
    conv must be several times the conv's, not the same (MobileNetV3's layers were
    estimated 1.5-2x too fast by FLOPs alone). Weights from DRAM: no cache holds them."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    fc_ms, fc_mflop = cpu_estimate_ms(one_layer("fc"))
    conv_ms, conv_mflop = cpu_estimate_ms(one_layer("conv"))
    assert 0.9 < fc_mflop / conv_mflop < 1.2, (fc_mflop, conv_mflop)
    assert fc_ms > 3 * conv_ms, (fc_ms, conv_ms)


def test_the_cpu_reads_a_models_weights_from_its_cache_when_they_all_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dense layer of 16 MB in a host cache of 64 MB streams its weights faster than from
    DRAM (the H200 host's 16 threads: 400-610 GB/s against 208), so its CPU estimate drops and
    says why; a cache of 8 MB, or none known, changes nothing; a bad size is a clear error."""
    model = one_layer("fc")
    times, texts = {}, {}
    for mb in ("0", "8", "64"):
        monkeypatch.setenv("CLGPU_CPU_CACHE_MB", mb)
        texts[mb] = estimate_text(model)
        times[mb] = cpu_estimate_ms(model)[0]
    assert times["8"] == times["0"], times
    assert times["64"] < 0.75 * times["0"], times
    assert "the CPU's weights in its cache" in texts["64"], texts["64"]
    assert not any("in its cache" in texts[mb] for mb in ("0", "8")), texts
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "-1")
    with pytest.raises(RuntimeError, match="CLGPU_CPU_CACHE_MB must be a size in MB"):
        delegate = clgpu_delegate.load(partitioning="cost")
        make_interpreter(model, [delegate], reference=True).allocate_tensors()


def test_a_float16_weight_counts_once_against_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense layer's 16.8 MB of floats from FLOAT16 weights: the interpreter reads the floats at
    each invoke, not the 8.4 MB half source as well, so a 20 MB cache holds them (24.1 MB with
    the source counted too would not)."""
    net, x = start((1, 1), 2048, seed=0, fp16_weights=True)
    model = net.finish(net.fc(net.b.reshape(x, (1, 2048)), 2048, act=None), softmax=False)
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "20")
    assert "the CPU's weights in its cache" in estimate_text(model)
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "16")
    assert "in its cache" not in estimate_text(model)


@pytest.mark.parametrize("int8", [False, True])
def test_a_mirror_pad_costs_tflites_own_kernel_on_the_cpu(int8: bool) -> None:
    """XNNPACK takes no MIRROR_PAD: TFLite's kernel runs it at several ns per element (16 on
    one thread of the H200's host), float or int8, which the roofline of a PAD's bytes misses by
    40x. The CPU estimate of a MIRROR_PAD exceeds that of the same PAD by its elements at 8 ns
    (litert-torch's int8 audio CNN, costed by its bytes, was declined at 4.7x the GPU's time)."""
    est = {}
    for op in ("pad", "mirror_pad"):
        net, x = start((64, 80), 32, seed=0, fp16_weights=False)
        y = getattr(net.b, op)(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
        model = net.finish(y, softmax=False)
        est[op] = cpu_estimate_ms(quantize_model(model, io="int8") if int8 else model)[0]
    expected_ms = 66 * 82 * 32 * 8e-6
    assert 0.9 < (est["mirror_pad"] - est["pad"]) / expected_ms < 1.05, (est, expected_ms)


def test_a_pad_of_the_channels_costs_the_cpu_a_row_at_a_time() -> None:
    """XNNPACK pads the last axis one output pixel at a time, about 3 ns each at 16 threads
    (bench/results/cpu-channel-ops-*), far over the bytes: a PAD of the channels costs its rows at
    3 ns, where the same elements padded along H cost their bytes alone."""
    est = {}
    padding = {
        "channels": [(0, 0), (0, 0), (0, 0), (0, 1)],
        "height": [(0, 0), (0, 256), (0, 0), (0, 0)],
    }
    for axis, pads in padding.items():
        net, x = start((256, 256), 1, seed=0, fp16_weights=False)
        est[axis] = cpu_estimate_ms(net.finish(net.b.pad(x, pads), softmax=False))[0]
    rows_ms = 256 * 256 * 3e-6
    assert 0.85 < (est["channels"] - est["height"]) / rows_ms < 1.01, (est, rows_ms)


def test_dynamic_range_weights_cost_the_cpu_its_hybrid_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TFLite runs a dynamic-range DEPTHWISE_CONV_2D in its hybrid kernel, not XNNPACK: 40 us a
    node and 2.8 ns an output element on the CPU side, over its float form's estimate; a
    dynamic-range FC reads its int8 weights, a byte each, where the float one reads four."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    net, x = start(56, 64, seed=0, fp16_weights=False)
    dw = net.finish(net.dwconv(x, 3, 1, act=None), softmax=False)
    float_ms = cpu_estimate_ms(dw)[0]
    hybrid_ms = cpu_estimate_ms(dynamic_range_model(dw))[0]
    expected_ms = 0.040 + 56 * 56 * 64 * 2.8e-6
    assert 0.9 < (hybrid_ms - float_ms) / expected_ms < 1.1, (float_ms, hybrid_ms, expected_ms)
    fc = one_layer("fc")  # 16 MB of float weights: their bytes set its CPU time
    fc_float_ms = cpu_estimate_ms(fc)[0]
    fc_hybrid_ms = cpu_estimate_ms(dynamic_range_model(fc))[0]
    assert fc_hybrid_ms < 0.4 * fc_float_ms, (fc_float_ms, fc_hybrid_ms)


def test_a_dynamic_range_conv_costs_its_input_conversion_and_gains_on_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """XNNPACK runs a dynamic-range CONV_2D as a conversion of its input to int8 (an operator,
    and a hand-off, of its own) and an int8 GEMM, about 4x the float one's arithmetic: a chain of
    1x1 convs on a spotter's small map costs the CPU more than in float (a DS-CNN's five ran
    27 us slower on the H200 host), a 3x3 conv of 128 channels on 48 x 48 much less."""
    monkeypatch.setenv("CLGPU_CPU_CACHE_MB", "0")
    net, x = start((25, 5), 64, seed=0, fp16_weights=False)
    for _ in range(8):
        x = net.conv(x, 64, 1, act=None)
    chain = net.finish(x, softmax=False)
    float_ms = cpu_estimate_ms(chain)[0]
    hybrid_ms = cpu_estimate_ms(dynamic_range_model(chain))[0]
    assert hybrid_ms > float_ms + 8 * 1e-3, (float_ms, hybrid_ms)
    net, x = start(48, 128, seed=0, fp16_weights=False)
    wide = net.finish(net.conv(x, 128, 3, act=None), softmax=False)
    wide_float_ms = cpu_estimate_ms(wide)[0]
    wide_hybrid_ms = cpu_estimate_ms(dynamic_range_model(wide))[0]
    assert wide_hybrid_ms < 0.5 * wide_float_ms, (wide_float_ms, wide_hybrid_ms)


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
    ms = {op: cpu_estimate_at(_int8_after_conv(op), 16, runtime)[0] for op in ("max", "avg")}
    expected = 28 * 28 * 64 * 5.3e-6
    assert 0.9 < (ms["avg"] - ms["max"]) / expected < 1.1, (ms, expected)
    base = cpu_estimate_at(_int8_after_conv(""), 16, runtime)[0]
    soft = cpu_estimate_at(_int8_after_conv("softmax"), 16, runtime)[0]
    assert 0.9 < (soft - base) / (56 * 56 * 64 * 3.7e-6) < 1.1, (base, soft)
    dw1 = cpu_estimate_at(_int8_after_conv("dw1", 64), 16, runtime)[0]
    dw2 = cpu_estimate_at(_int8_after_conv("dw2", 32), 16, runtime)[0]
    expected = 56 * 56 * 32 * 9 * 0.54e-6
    assert 0.85 < (dw2 - dw1) / expected < 1.1, (dw1, dw2, expected)


def test_the_cpu_estimate_is_for_the_interpreters_threads(runtime: str) -> None:
    """XNNPACK runs on the threads the interpreter gives it: one, without a pool, when the user
    sets none (tflite_runtime passes -1, ai_edge_litert 1), at most the host's cores. Fewer
    threads hand each node off faster (1.88 us on one thread against 2.03 + 0.186 x 2 on two,
    in the sweep's figures): small layers' CPU estimate is lower on one thread, by about their
    ratio. A compute-bound layer is never estimated slower than on the 16 threads of the fit
    (the sweep's one-thread arithmetic missed small models by up to 5x either way)."""
    cores = os.cpu_count() or 1
    small = small_layers(40)
    unset_ms, unset_threads = cpu_estimate_at(small, None, runtime)
    one_ms, one_threads = cpu_estimate_at(small, 1, runtime)
    assert unset_threads == one_threads == 1
    assert unset_ms == pytest.approx(one_ms)
    _, many_threads = cpu_estimate_at(small, cores + 8, runtime)
    assert many_threads == cores
    sixteen_ms = 40 * 8.0e-3  # the 16-thread fit's hand-off of 40 float convolutions
    assert one_ms < 0.5 * sixteen_ms, one_ms
    conv = one_layer("conv")
    conv_one_ms, _ = cpu_estimate_at(conv, 1, runtime)
    if cores >= 2:
        two_ms, two_threads = cpu_estimate_at(small, 2, runtime)
        assert two_threads == 2
        assert 0.7 < one_ms / two_ms < 0.85, (one_ms, two_ms)
        conv_two_ms, _ = cpu_estimate_at(conv, 2, runtime)
        assert conv_one_ms < 1.2 * conv_two_ms, (conv_one_ms, conv_two_ms)


def _small_adds(count: int, size: int = 4) -> bytes:
    """As small_layers, with ADDs of a constant for the convolutions."""
    net, x = start(size, 8, seed=0, fp16_weights=False)
    for _ in range(count):
        x = net.b.add(x, net.b.rand((1, 1, 8)))
    return net.finish(x, softmax=False)


def test_a_convolution_hands_off_longer_than_an_element_wise_op(runtime: str) -> None:
    """XNNPACK hands a float convolution between its threads in about 8 us on the H200's host
    (16 threads), an int8 one in 6, an ADD in 2 (bench/results/cpu-handoff-NVIDIA_H200.md):
    with one figure for every node (4.7 us) float keyword spotters came out 20-30 % too fast
    on the CPU and int8 ones right. Layers too small for their arithmetic to count cost the
    CPU those hand-offs, in about those ratios, on any thread count: 40 float convolutions on a
    16 x 16 x 8 map (past the 2,000 output elements below which a convolution hands off less,
    the next test) over 40 ADDs of the same map take (8 - 2) / 2 of what 40 tiny ADDs take,
    less their traffic; int8 convolutions lie between the two."""
    convs_ms, threads = cpu_estimate_at(small_layers(40, 16), 16, runtime)
    adds_ms, _ = cpu_estimate_at(_small_adds(40, 16), 16, runtime)
    tiny_adds_ms, _ = cpu_estimate_at(_small_adds(40, 4), 16, runtime)
    int8_ms, _ = cpu_estimate_at(quantize_model(small_layers(40, 16)), 16, runtime)
    assert 2.6 < (convs_ms - adds_ms) / tiny_adds_ms < 3.1, (convs_ms, adds_ms, tiny_adds_ms)
    assert adds_ms < int8_ms < convs_ms, (adds_ms, int8_ms, convs_ms, threads)


@pytest.mark.parametrize("size", [8, 11])
def test_a_convolution_of_a_small_output_hands_off_less(runtime: str, size: int) -> None:
    """A convolution's hand-off rises from 2 us at no output to its kind's figure at 2,000
    output elements (fitted on the H200 tables, bench/results/cpu-handoff-small-NVIDIA_H200.md:
    an 8-channel DS-CNN of 23 us on XNNPACK had been estimated at 50): over the ADDs' 2 us, 40
    float convolutions on a size x size x 8 map take size^2 x 8 / 2,000 of what they take at
    16 x 16 x 8; int8 ones take less than there too."""
    convs_ms, threads = cpu_estimate_at(small_layers(40, size), 16, runtime)
    adds_ms, _ = cpu_estimate_at(_small_adds(40, size), 16, runtime)
    big_ms, _ = cpu_estimate_at(small_layers(40, 16), 16, runtime)
    big_adds_ms, _ = cpu_estimate_at(_small_adds(40, 16), 16, runtime)
    share = (convs_ms - adds_ms) / (big_ms - big_adds_ms)
    expected = size * size * 8 / 2000
    assert 0.85 * expected < share < 1.15 * expected, (convs_ms, adds_ms, big_ms, threads)
    int8_ms, _ = cpu_estimate_at(quantize_model(small_layers(40, size)), 16, runtime)
    int8_big_ms, _ = cpu_estimate_at(quantize_model(small_layers(40, 16)), 16, runtime)
    assert int8_ms < int8_big_ms, (int8_ms, int8_big_ms)


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
    logistic_ms = cpu_estimate_ms(_activated("logistic", True))[0]
    hard_swish_ms = cpu_estimate_ms(_activated("hard_swish", True))[0]
    relu_ms = cpu_estimate_ms(_activated("relu", True))[0]
    assert 1.1 < hard_swish_ms - logistic_ms < 1.3, (hard_swish_ms, logistic_ms)
    assert 3.0 < relu_ms - logistic_ms < 3.4, (relu_ms, logistic_ms)
    float_ms = [cpu_estimate_ms(_activated(a, False))[0] for a in ("logistic", "hard_swish")]
    assert abs(float_ms[0] - float_ms[1]) < 0.05, float_ms


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
            est[tiles, hw, c] = cpu_estimate_ms(_int8_conv_3x3(hw, c))[0]
    assert est["0", 64, 16] > est["0", 64, 1], est
    assert est["1", 64, 1] > 2 * est["0", 64, 1], est
    assert est["1", 64, 16] == pytest.approx(est["1", 64, 1], rel=0.15), est
    assert 3 < est["1", 128, 1] / est["1", 64, 1] < 4.5, est
    monkeypatch.setenv("CLGPU_CPU_INT8_TILES", "2")
    with pytest.raises(RuntimeError, match="CLGPU_CPU_INT8_TILES must be 0 or 1"):
        estimate_text(_int8_conv_3x3(64, 1))


def _float_conv_3x3(out_channels: int) -> bytes:
    net, x = start(128, 8, seed=0, fp16_weights=False)  # 19-57 MFLOP: the arithmetic sets it
    return net.finish(net.conv(x, out_channels, 3, act=None), softmax=False)


def test_a_float_convolution_pays_for_the_hosts_padded_row_of_output_channels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """XNNPACK computes a float convolution's output channels a row of vector lanes at a time
    (16 on AVX-512 hosts, CLGPU_CPU_FLOAT_LANES or the host's CPUID): 8 output channels take
    the time of 16 there (bench/results/cpu-int8-conv-*.md: 1.6-2.3x the roofline), where a
    roofline by multiply-adds halves it. On 8 lanes, or with channels that fill the rows, the
    roofline stands. A bad value is a clear error."""
    est = {}
    for lanes in ("1", "8", "16"):
        monkeypatch.setenv("CLGPU_CPU_FLOAT_LANES", lanes)
        for oc in (8, 16, 24):
            est[lanes, oc] = cpu_estimate_ms(_float_conv_3x3(oc))[0]
    assert est["1", 8] < 0.6 * est["1", 16], est
    assert est["8", 8] == est["1", 8] and est["8", 24] == est["1", 24], est
    assert est["16", 8] == pytest.approx(est["16", 16], rel=0.05), est
    assert est["16", 24] > 1.25 * est["1", 24], est  # padded to 32
    assert est["16", 16] == est["1", 16], est
    monkeypatch.setenv("CLGPU_CPU_FLOAT_LANES", "0")
    with pytest.raises(RuntimeError, match="CLGPU_CPU_FLOAT_LANES must be a lane count"):
        estimate_text(_float_conv_3x3(8))


def test_int8_prelu_costs_the_cpu_tflites_own_kernel() -> None:
    """XNNPACK takes no int8 PRELU: TFLite's own kernel runs it on one thread, about 10 ns an
    element on the H200's host (12 ms for 128 x 128 x 64), so the CPU estimate of a conv and a
    PRELU over 200,704 elements is about 2 ms over the conv and a LOGISTIC; in float, XNNPACK's
    roofline stays."""
    logistic_ms = cpu_estimate_ms(_activated("logistic", True))[0]

    def prelu(int8: bool) -> bytes:
        net, x = start(56, 16, seed=0, fp16_weights=False)
        y = net.conv(x, 64, 1, act=None)
        model = net.finish(net.b.prelu(y, np.full((1, 1, 64), 0.2, np.float32)), softmax=False)
        return quantize_model(model) if int8 else model

    prelu_ms = cpu_estimate_ms(prelu(True))[0]
    assert 1.9 < prelu_ms - logistic_ms < 2.1, (prelu_ms, logistic_ms)
    float_gap = cpu_estimate_ms(prelu(False))[0] - cpu_estimate_ms(_activated("logistic", False))[0]
    assert abs(float_gap) < 0.05, float_gap
