"""CONV_2D parity with stock TFLite CPU: kernel sizes, strides, dilations, paddings, odd sizes,
activations, bias; every forced conv algorithm (those that do not apply fall back)."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from parity import CONV_ALGORITHMS, check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Conv(NamedTuple):
    input: tuple[int, int, int, int]  # N, H, W, C
    out_channels: int
    kernel: tuple[int, int]
    stride: int | tuple[int, int] = 1
    dilation: int | tuple[int, int] = 1
    padding: str = "SAME"
    activation: str | None = None
    bias: bool = True


CASES = {
    "3x3_batch2": Conv((2, 9, 11, 3), 5, (3, 3)),
    "3x3_c17_oc19_relu": Conv((1, 13, 12, 17), 19, (3, 3), activation="RELU"),
    "3x3_s1_winograd_shape": Conv((1, 16, 14, 8), 12, (3, 3), activation="RELU6"),
    "1x1": Conv((1, 7, 7, 5), 6, (1, 1), padding="VALID", activation="RELU"),
    "1x1_batch2_c35": Conv((2, 5, 9, 35), 13, (1, 1), bias=False),
    "1x1_s3_same": Conv((1, 11, 11, 5), 5, (1, 1), stride=3),  # SAME, stride > kernel
    "1x1_s2_valid": Conv((2, 10, 9, 6), 7, (1, 1), stride=2, padding="VALID"),
    "3x3_s2_nobias_relu6": Conv(
        (2, 10, 13, 7), 9, (3, 3), stride=2, activation="RELU6", bias=False
    ),
    "3x3_s3": Conv((1, 14, 17, 4), 3, (3, 3), stride=3),
    "3x3_d2_valid": Conv(
        (1, 12, 10, 9), 17, (3, 3), dilation=2, padding="VALID", activation="RELU6"
    ),
    "5x5_d2_n1to1": Conv((1, 15, 12, 6), 7, (5, 5), dilation=2, activation="RELU_N1_TO_1"),
    "5x5_valid_c1": Conv((2, 11, 9, 1), 1, (5, 5), padding="VALID"),
    "5x5_s2_same": Conv((1, 13, 13, 3), 8, (5, 5), stride=2, activation="RELU"),
    "7x7_s2_stem": Conv((1, 17, 19, 3), 10, (7, 7), stride=2, activation="RELU"),
    "7x7_s3_valid": Conv((1, 20, 21, 2), 5, (7, 7), stride=3, padding="VALID"),
    "3x5_aniso": Conv(
        (1, 12, 13, 2), 3, (3, 5), stride=(1, 2), dilation=(2, 1), activation="RELU_N1_TO_1"
    ),
    "5x5_larger_than_input": Conv((1, 3, 4, 2), 3, (5, 5)),
    "1x7_then_7x1_like": Conv((1, 9, 15, 5), 6, (1, 7), stride=(2, 1)),
    # Inception v3's factorized kernels with channels enough for the tiled algorithms; the 1x3
    # SAME on a map narrower than the kernel (its 8x8 blocks at a small input).
    "7x1_c20_oc24_relu": Conv((1, 11, 9, 20), 24, (7, 1), activation="RELU"),
    "1x3_c36_oc40_narrow": Conv((1, 3, 2, 36), 40, (1, 3), activation="RELU"),
    "3x1_s2_valid_c17": Conv((1, 12, 7, 17), 9, (3, 1), stride=2, padding="VALID"),
    # Enough channels for the tiled algorithms (GEMM, Winograd) to pick them, with remainders.
    "3x3_c37_oc45_tiles": Conv((1, 13, 11, 37), 45, (3, 3), activation="RELU"),
    "3x3_batch2_c33_oc64": Conv((2, 9, 10, 33), 64, (3, 3), activation="RELU6"),
    "3x3_valid_c16_oc17": Conv((1, 10, 9, 16), 17, (3, 3), padding="VALID"),
    "1x1_c67_oc70": Conv((1, 7, 9, 67), 70, (1, 1), activation="RELU"),
    "1x1_batch2_c64_oc48_nobias": Conv((2, 8, 8, 64), 48, (1, 1), bias=False),
    "5x5_c24_oc40": Conv((1, 11, 12, 24), 40, (5, 5), stride=2, activation="RELU_N1_TO_1"),
    # Stride 1 filters over 3x3: Winograd F(4x4) runs them as sums of 3x3 sub-filters.
    "5x5_s1_c24_oc40": Conv((1, 11, 12, 24), 40, (5, 5), activation="RELU"),
    "5x5_s1_valid_batch2": Conv((2, 10, 11, 5), 6, (5, 5), padding="VALID"),
    "7x7_s1_c9_oc33": Conv((1, 13, 14, 9), 33, (7, 7), activation="RELU6"),
    "9x9_s1_c4_oc3": Conv((1, 12, 10, 4), 3, (9, 9)),
    "4x6_s1_valid_aniso": Conv((1, 11, 13, 6), 7, (4, 6), padding="VALID"),
    "3x7_s1_c17": Conv((1, 9, 12, 17), 4, (3, 7), bias=False),
    # direct_blocked: rows of many pixel blocks with a ragged end, channel blocks with a tail.
    "3x3_c8_oc33_wide": Conv((1, 5, 45, 8), 33, (3, 3), activation="RELU"),
    # A dilation wide enough that direct_blocked loads each tap's columns, not one segment.
    "3x3_d5_c4": Conv((1, 14, 23, 4), 6, (3, 3), dilation=5),
    # winograd4_fused's target shapes, small: 4 -> 32 (one reduction chunk), 16 -> 16 (several),
    # and a channel count that its chunks (CC) and an OC that its channel blocks do not divide.
    "3x3_c4_oc32": Conv((1, 14, 19, 4), 32, (3, 3)),
    "3x3_c16_oc16_batch2": Conv((2, 11, 13, 16), 16, (3, 3), activation="RELU"),
    "3x3_c6_oc37_valid": Conv((1, 12, 15, 6), 37, (3, 3), padding="VALID", activation="RELU6"),
    # Rows of more tiles than the GPU blocking's 16 per group: two blocks, the second ragged.
    "3x3_c12_oc24_wide_batch2": Conv((2, 6, 75, 12), 24, (3, 3), activation="RELU6"),
}


def conv_model(case: Conv, seed: int = 0, fp16_weights: bool = False) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", case.input)
    kh, kw = case.kernel
    c = case.input[3]
    w = b.rand((case.out_channels, kh, kw, c), scale=math.sqrt(2.0 / (kh * kw * c)))
    bias = b.rand((case.out_channels,), scale=0.5) if case.bias else None
    b.output(
        b.conv2d(
            x,
            w,
            bias,
            stride=case.stride,
            dilation=case.dilation,
            padding=case.padding,
            activation=case.activation,
            fp16_weights=fp16_weights,
        )
    )
    return b.build()


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_conv2d_parity(case: Conv, algorithm: str, runtime: str) -> None:
    check_parity(conv_model(case), runtime, expect_delegated="all", conv_algorithm=algorithm)


@pytest.mark.parametrize("splits", [0, 3])
def test_conv2d_split_k_plan_of_an_empty_batch(splits: int, runtime: str) -> None:
    # A batch resized to 0 gives no output tiles: the split-K plan must not divide by them
    # (it did: SIGFPE under the sanitizer build), and the next real batch still runs split.
    model = conv_model(CASES["3x3_c37_oc45_tiles"])
    d = clgpu_delegate.load(partitioning="all", conv_algorithm="implicit_gemm", gemm_splits=splits)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    index = it.get_input_details()[0]["index"]
    for batch in (0, 2):
        it.resize_tensor_input(index, (batch, 13, 11, 37))
        it.allocate_tensors()
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(ref.get_input_details()[0]["index"], (batch, 13, 11, 37))
        ref.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), seed=batch)
        got, want = run(it, inputs), run(ref, inputs)
        assert got[0].shape == want[0].shape == (batch, 13, 11, 45)
        compare(got, want, 1e-4, None, f" (batch {batch})")
    assert d.delegated_nodes() == [0]


@pytest.mark.parametrize("activation", ["TANH", "SIGN_BIT"])
def test_conv2d_tanh_and_sign_bit_apply_nothing(activation: str, runtime: str) -> None:
    # TFLite's float conv kernels take a fused TANH / SIGN_BIT as the whole float range (they
    # apply nothing); so does the delegate, and a RELU after it still folds in.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 9, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), activation=activation)
    b.output(b.relu(b.conv2d(y, b.rand((5, 1, 1, 4)), activation=activation)))
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert {k.op for k in r.delegate.profile().kernels} == {"CONV_2D"}


def test_conv2d_next_to_unsupported_one(runtime: str) -> None:
    # A claimed conv feeding one with a run-time bias: one delegated node, output still exact.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 10, 10, 3))
    y = b.conv2d(x, b.rand((6, 3, 3, 3)), activation="RELU")
    z = b.conv2d(y, b.rand((4, 3, 3, 6)), b.input("bias", (4,)))
    b.output(z)
    check_parity(b.build(), runtime, expect_delegated={0}, expect_cpu={1})


def test_conv2d_repeated_invokes_with_new_inputs(runtime: str) -> None:
    # Buffers are reused across invokes: every invoke must see its own input.
    model = conv_model(CASES["3x3_batch2"])
    r = check_parity(model, runtime, expect_delegated="all")
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    for seed in range(1, 4):
        inputs = random_inputs(ref.get_input_details(), seed)
        compare(run(r.interpreter, inputs), run(ref, inputs), 1e-4, None)
    assert r.delegate.stats().invokes == 4


# PX,OCB,WGX,WGY of conv2d_blocked.cl forced on both table entries: the GPU-sized blocks the CPU
# table does not use, odd blocks (scalar weights and stores), one work-item per group.
BLOCKED_KNOBS = {
    "px8_ocb16": "8,16,32,4",
    "px4_ocb32": "4,32,8,8",
    "px16_ocb4": "16,4,16,2",
    "px3_ocb5": "3,5,4,3",
    "px1_ocb1": "1,1,1,1",
}
BLOCKED_CASES = [
    "3x3_batch2",
    "3x3_c37_oc45_tiles",
    "3x3_batch2_c33_oc64",
    "1x1_s2_valid",
    "7x7_s2_stem",
    "7x7_s1_c9_oc33",
    "3x5_aniso",
    "5x5_d2_n1to1",
    "9x9_s1_c4_oc3",
    "3x3_c8_oc33_wide",
    "3x3_d5_c4",
]


def set_blocked_knobs(monkeypatch: pytest.MonkeyPatch, knobs: str) -> None:
    # The table is read at every prepare, so the override applies to the next delegate.
    for entry in ("DIRECT_BLOCKED", "DIRECT_BLOCKED_THIN"):
        monkeypatch.setenv(f"CLGPU_TUNE_{entry}", knobs)


@pytest.mark.parametrize("knobs", BLOCKED_KNOBS.values(), ids=BLOCKED_KNOBS.keys())
@pytest.mark.parametrize("name", BLOCKED_CASES)
def test_conv2d_blocked_knobs(
    name: str, knobs: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_blocked_knobs(monkeypatch, knobs)
    r = check_parity(
        conv_model(CASES[name]),
        runtime,
        expect_delegated="all",
        conv_algorithm="direct_blocked",
        profiling=True,
    )
    assert {k.algorithm for k in r.delegate.profile().kernels} == {"direct_blocked"}


# TP,OCB,CC,RT,RO,U_LOCAL[,PS] of conv2d_winograd4_fused.cl: the GPU table's blocking (OCB 32
# over fewer channels, tiles past the row's end), U read from global, 4 x 4 register blocks, odd
# blocks that divide nothing, one work-item per group; positions split over 4, 6 (the NVIDIA
# table's blocking), 9 and 36 work-items (M exchanged through local memory), with staged or
# global U and odd blocks.
FUSED_KNOBS = {
    "gpu": "16,32,4,2,2,1",
    "u_global": "16,32,4,2,2,0",
    "rt4_ro4_cc8": "8,16,8,4,4,1",
    "odd": "6,9,3,3,3,1",
    "one": "1,1,1,1,1,0",
    "ps4": "16,16,4,4,4,0,4",
    "nvidia": "16,32,8,8,2,0,6",
    "ps9_odd": "6,9,3,3,3,1,9",
    "ps36": "4,4,2,2,2,1,36",
}
FUSED_CASES = [
    "3x3_c12_oc24_wide_batch2",
    "3x3_c8_oc33_wide",
    "3x3_batch2",
    "3x3_c17_oc19_relu",
    "3x3_batch2_c33_oc64",
    "3x3_c4_oc32",
    "3x3_c16_oc16_batch2",
    "3x3_c6_oc37_valid",
    "5x5_s1_valid_batch2",
    "7x7_s1_c9_oc33",
    "4x6_s1_valid_aniso",
]


def set_fused_knobs(monkeypatch: pytest.MonkeyPatch, knobs: str) -> None:
    monkeypatch.setenv("CLGPU_TUNE_WINOGRAD4_FUSED", knobs)


@pytest.mark.parametrize("knobs", FUSED_KNOBS.values(), ids=FUSED_KNOBS.keys())
@pytest.mark.parametrize("name", FUSED_CASES)
def test_conv2d_winograd4_fused_knobs(
    name: str, knobs: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_fused_knobs(monkeypatch, knobs)
    r = check_parity(
        conv_model(CASES[name]),
        runtime,
        expect_delegated="all",
        conv_algorithm="winograd4_fused",
        profiling=True,
    )
    # One kernel and no scratch: the transformed tiles never leave the chip.
    assert {k.kernel for k in r.delegate.profile().kernels} == {"conv2d_winograd4_fused"}
    assert r.delegate.profile().partitions[0].kernels_per_invoke == 1
    assert r.delegate.memory().partitions[0].scratch_bytes == 0


BAD_KNOBS = [
    ("direct_blocked", k) for k in ["8,0,32,4", "65,4,8,8", "8,16,32", "8,16,32,4,1", "a,b,c,d"]
] + [
    ("winograd4_fused", k)
    for k in [
        "16,32,4,3,2",
        "16,30,4,2,4",
        "0,8,4,2,2",
        "16,32,4,2,2,2",
        "16,32,4,2",
        "a,b,c,d,e",
        "16,32,4,2,2,0,5",
        "16,32,4,2,2,0,0",
        "16,32,4,2,2,0,4,1",
    ]
]


@pytest.mark.parametrize(("algorithm", "knobs"), BAD_KNOBS)
def test_conv2d_bad_tuning_knobs_fail(
    algorithm: str, knobs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sweep must not time a fallback configuration under the name it asked for.
    env = f"CLGPU_TUNE_{algorithm.upper()}"
    monkeypatch.setenv(env, knobs)
    d = clgpu_delegate.load(conv_algorithm=algorithm)
    it = make_interpreter(conv_model(CASES["3x3_c37_oc45_tiles"]), [d])
    with pytest.raises(RuntimeError, match=env):
        it.allocate_tensors()


def test_conv2d_winograd4_fused_knobs_changed_under_a_prepared_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The filter is laid out for one OCB: a re-prepare (a new input size) under other knobs must
    # say so, not run a kernel that reads the layout wrongly.
    set_fused_knobs(monkeypatch, "8,8,4,1,1,1")
    d = clgpu_delegate.load(conv_algorithm="winograd4_fused", partitioning="all")
    it = make_interpreter(conv_model(CASES["3x3_c37_oc45_tiles"]), [d])
    it.allocate_tensors()
    set_fused_knobs(monkeypatch, "8,16,4,1,1,1")
    it.resize_tensor_input(it.get_input_details()[0]["index"], (1, 9, 11, 37))
    with pytest.raises(RuntimeError, match="CLGPU_TUNE_WINOGRAD4_FUSED"):
        it.allocate_tensors()
