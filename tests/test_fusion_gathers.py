"""Chains of data-movement ops run as one gather (fusion/gathers.cc, kernels/gather_chain.cl):
TRANSPOSE, PAD / PADV2 / MIRROR_PAD, STRIDED_SLICE / SLICE and the RESHAPE / EXPAND_DIMS between
them, as NCHW converters write them around 1-D convolutions. Against TFLite's CPU kernels with
the pass on and off, float32, fp16 storage and int8 (bit-exact): an op read by two chains runs in
both; no fold through a partition output; the cost model counts the launches saved."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, launches
from int8_parity import check_int8_parity
from parity import check_parity, precision_tolerances

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

NO_GATHERS = "affine,pad,clamp,epilogue,residual,views,squeeze,gate,depthwise,prelu,expand,pool"


def audio_stage(length: int = 40, seed: int = 0, quantize: bool = False, output_t: bool = False):
    """One stage of an NCHW audio front end: a TRANSPOSE read by a zero PAD and a MIRROR_PAD, each
    transposed back and given a unit axis before its convolution (basic-pitch's pattern)."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, length, 1))
    t = b.transpose(x, (0, 2, 1))  # (1, 1, L)
    if output_t:  # a partition output: nothing folds through it
        b.output(t)
    p = b.pad(t, [[0, 0], [0, 0], [3, 4]])
    m = b.mirror_pad(t, [[0, 0], [0, 0], [5, 5]], "REFLECT")
    for y, k in ((p, 4), (m, 6)):
        y = b.expand_dims(b.transpose(y, (0, 2, 1)), 1)  # (1, 1, L', 1)
        b.output(b.conv2d(y, b.rand((2, 1, k, 1)), b.rand((2,), 0.2), 1, 2, "VALID", None))
    model = b.build()
    return quantize_model(model, io="int8", seed=seed) if quantize else model


def slice_pad_concat(seed: int = 1, quantize: bool = False) -> bytes:
    """Harmonic stacking: strided slices of a spectrogram, each padded back to its width, then
    concatenated (a STRIDED_SLICE -> PAD per shift), and a rank-4 TRANSPOSE -> strided slice
    of step 2 -> SYMMETRIC MIRROR_PAD row."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 6, 20, 1))
    parts = []
    for shift in (0, 3, 7):
        s = b.strided_slice(x, [0, 0, shift, 0], [1, 6, 20, 1])
        parts.append(b.pad(s, [[0, 0], [0, 0], [0, shift], [0, 0]]))
    b.output(b.concat(parts, 3))
    t = b.transpose(x, (0, 2, 1, 3))  # (1, 20, 6, 1)
    s = b.strided_slice(t, [0, 1, 0, 0], [1, 19, 6, 1], [1, 2, 1, 1])  # (1, 9, 6, 1)
    b.output(b.mirror_pad(s, [[0, 0], [2, 1], [1, 2], [0, 0]], "SYMMETRIC"))
    model = b.build()
    return quantize_model(model, io="int8", seed=seed) if quantize else model


def chained(r: Any) -> int:
    return folded_nodes(r, "gather_chain")


def check_float(model: bytes, runtime: str, ends: int, saved: int, precision: str = "fp32") -> None:
    common: dict[str, Any] = {
        "profiling": True,
        "partitioning": "all",
        "expect_delegated": "all",
        "precision": precision,
        **precision_tolerances(precision),
    }
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_GATHERS, **common)
    assert chained(off) == 0
    assert chained(on) == ends, on.delegate.profile().table()
    assert launches(on) == launches(off) - saved, on.delegate.profile().table()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_an_audio_front_end_stage_runs_two_gathers(runtime: str, precision: str) -> None:
    # Off: TRANSPOSE, PAD, TRANSPOSE, MIRROR_PAD, TRANSPOSE; on: the two last TRANSPOSEs, each
    # running the first TRANSPOSE and its pad (the EXPAND_DIMS cost nothing either way).
    check_float(audio_stage(seed=2), runtime, ends=2, saved=3, precision=precision)


def test_slices_padded_back_and_a_symmetric_pad(runtime: str) -> None:
    # Three STRIDED_SLICE -> PAD pairs (a copy each, the whole width a buffer copy) and
    # TRANSPOSE -> STRIDED_SLICE -> MIRROR_PAD: four launches and CONCATENATION's, from ten.
    check_float(slice_pad_concat(), runtime, ends=4, saved=5)


def test_no_fold_through_a_partition_output(runtime: str) -> None:
    # The first TRANSPOSE is a model output: the pads keep reading it; only the TRANSPOSEs after
    # them take their pads.
    check_float(audio_stage(seed=3, output_t=True), runtime, ends=2, saved=2)


@pytest.mark.parametrize("make", [audio_stage, slice_pad_concat], ids=["audio", "slices"])
def test_int8_chains_are_bit_exact(runtime: str, make: Any) -> None:
    model = make(seed=4, quantize=True)
    common = {"min_fraction": 1.0, "max_quanta": 0, "profiling": True, "partitioning": "all"}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse=NO_GATHERS)
    assert chained(off) == 0 and chained(on) >= 2, on.delegate.profile().table()
    assert launches(on) < launches(off)


def test_the_cost_model_counts_the_gathers(runtime: str) -> None:
    estimated, launched = estimated_and_launched(audio_stage(length=64, seed=5), runtime)
    assert estimated and set(estimated) == {launched}, (estimated, launched)


def test_a_long_chain_matches_numpy(runtime: str) -> None:
    # Reflect, transpose, slice with a negative step, constant pad of a value, reshape: one
    # launch, checked against numpy's own ops as well as TFLite's.
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 5, 7))
    y = b.mirror_pad(x, [[0, 0], [1, 2], [2, 0]], "REFLECT")  # (2, 8, 9)
    y = b.transpose(y, (2, 0, 1))  # (9, 2, 8)
    y = b.strided_slice(y, [8, 0, 0], [0, 2, 8], [-2, 1, 1])  # (4, 2, 8)
    y = b.reshape(y, (4, 16))
    y = b.pad_v2(y, [[1, 0], [0, 3]], 2.5)  # (5, 19)
    b.output(b.transpose(y, (1, 0)))
    model = b.build()
    xs = np.random.default_rng(7).standard_normal((2, 5, 7)).astype(np.float32)
    want = np.pad(xs, [[0, 0], [1, 2], [2, 0]], mode="reflect").transpose(2, 0, 1)[8:0:-2]
    want = np.pad(want.reshape(4, 16), [[1, 0], [0, 3]], constant_values=2.5).T
    r = check_parity(model, runtime, inputs=[xs], profiling=True, partitioning="all", atol=0)
    np.testing.assert_array_equal(r.outputs[0], want)
    assert launches(r) == 1, r.delegate.profile().table()


def round_trip(
    back: tuple[int, ...] = (0, 2, 3, 1),
    quantize: bool = False,
    seed: int = 8,
    out_mid: bool = False,
) -> bytes:
    """conv -> TRANSPOSE to NCHW -> RESHAPE (H and W merged) -> RESHAPE back -> TRANSPOSE `back`
    -> conv, and the model input through a TRANSPOSE pair before the first conv: with `back` the
    inverse, each row comes back to where it started."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 6, 5, 3))
    x = b.transpose(b.transpose(x, (0, 3, 1, 2)), (0, 2, 3, 1))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,), 0.2), 1, 1, "SAME", "RELU")
    t = b.transpose(y, (0, 3, 1, 2))  # (1, 4, 6, 5)
    if out_mid:
        b.output(t)
    t = b.reshape(b.reshape(t, (1, 4, 30)), (1, 4, 6, 5))
    z = b.transpose(t, back)
    cin = b.shape(z)[3]
    b.output(b.conv2d(z, b.rand((2, 3, 3, cin)), b.rand((2,), 0.2), 1, 1, "SAME", None))
    model = b.build()
    return quantize_model(model, io="int8", seed=seed) if quantize else model


def test_a_row_back_to_its_start_runs_no_kernel(runtime: str) -> None:
    # Both rows (four TRANSPOSEs) launch nothing: the convolutions read the input and each other.
    check_float(round_trip(), runtime, ends=0, saved=4)


def test_a_row_to_another_layout_keeps_its_gather(runtime: str) -> None:
    # (0, 2, 1, 3) after NCHW is not the way back: one gather for that row; the input's pair
    # still runs nothing.
    check_float(round_trip(back=(0, 2, 1, 3)), runtime, ends=1, saved=3)


def test_no_bypass_through_a_partition_output(runtime: str) -> None:
    # The first TRANSPOSE's output is a model output: it runs, and the second reads it.
    check_float(round_trip(out_mid=True), runtime, ends=0, saved=2)


def test_int8_round_trip_is_bit_exact(runtime: str) -> None:
    model = round_trip(quantize=True, seed=9)
    common = {"min_fraction": 1.0, "max_quanta": 0, "profiling": True, "partitioning": "all"}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse=NO_GATHERS)
    assert launches(on) == launches(off) - 4, on.delegate.profile().table()


def test_the_cost_model_counts_the_bypass(runtime: str) -> None:
    estimated, launched = estimated_and_launched(round_trip(seed=10), runtime)
    assert estimated and set(estimated) == {launched}, (estimated, launched)


def random_row(seed: int, quantize: bool) -> bytes:
    """A random row of 3-6 data-movement ops on a small tensor of rank 3 or 4 (TRANSPOSE, PAD,
    MIRROR_PAD of either mode, STRIDED_SLICE of steps 1-2, RESHAPE merging two axes,
    EXPAND_DIMS), sometimes with a second row from one of its tensors and sometimes that tensor a
    model output too."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(seed=seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(3, 5))))
    y = b.input("x", shape)
    tensors = [y]
    for _ in range(int(rng.integers(3, 7))):
        s = b.shape(y)
        kind = rng.choice(["transpose", "pad", "mirror", "slice", "reshape", "expand"])
        if kind == "transpose":
            y = b.transpose(y, tuple(int(p) for p in rng.permutation(len(s))))
        elif kind == "pad":
            y = b.pad(y, [[int(rng.integers(0, 3)), int(rng.integers(0, 3))] for _ in s])
        elif kind == "mirror":
            mode = str(rng.choice(["REFLECT", "SYMMETRIC"]))
            lim = [d - 1 if mode == "REFLECT" else d for d in s]
            pads = [[int(rng.integers(0, min(m, 2) + 1)) for _ in range(2)] for m in lim]
            y = b.mirror_pad(y, pads, mode)
        elif kind == "slice":
            begin, end, step = [], [], []
            for d in s:
                lo = int(rng.integers(0, d))
                begin.append(lo), end.append(int(rng.integers(lo + 1, d + 1)))
                step.append(int(rng.integers(1, 3)))
            y = b.strided_slice(y, begin, end, step)
        elif kind == "reshape" and len(s) >= 2:
            a = int(rng.integers(0, len(s) - 1))
            y = b.reshape(y, (*s[:a], s[a] * s[a + 1], *s[a + 2 :]))
        elif len(s) < 5:
            y = b.expand_dims(y, int(rng.integers(0, len(s) + 1)))
        tensors.append(y)
    b.output(y)
    if rng.random() < 0.5 and len(tensors) > 2:
        t = tensors[int(rng.integers(1, len(tensors) - 1))]
        if rng.random() < 0.3:
            b.output(t)
        b.output(b.pad(t, [[1, 0]] + [[0, 0]] * (len(b.shape(t)) - 1)))
    model = b.build()
    return quantize_model(model, io="int8", seed=seed) if quantize else model


@pytest.mark.parametrize("seed", range(12))
def test_random_rows_match_tflite_exactly(runtime: str, seed: int) -> None:
    # Pure data movement: every element as TFLite moves it, float bit for bit and int8 exactly,
    # with the pass on never more launches than off (11 of these 12 draws fold a row; 8 add a
    # second row from a tensor of the first, 2 of those a model output too).
    quantize = seed % 3 == 2
    model = random_row(seed, quantize)
    if quantize:
        common = {"min_fraction": 1.0, "max_quanta": 0, "profiling": True, "partitioning": "all"}
        on = check_int8_parity(model, runtime, **common)
        off = check_int8_parity(model, runtime, **common, fuse=NO_GATHERS)
    else:
        common = {"profiling": True, "partitioning": "all", "expect_delegated": "all"}
        on = check_parity(model, runtime, **common)
        off = check_parity(model, runtime, fuse=NO_GATHERS, **common)
        for got, want in zip(on.outputs, on.reference, strict=True):
            np.testing.assert_array_equal(got, want)
    assert launches(on) <= launches(off), on.delegate.profile().table()
