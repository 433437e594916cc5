"""The int8 GEMM split along K (forced with option gemm_splits: on PoCL the automatic choice never
splits) against TFLite's int8 kernels, bit for bit: FULLY_CONNECTED with one and a few rows, the
1x1 GEMM and the 3x3 implicit GEMM (packed and byte-wise im2col), K not a multiple of the split
nor of 4, per-channel and per-tensor weights, fused activations, and the 64 x 64 tiles. One
launch: the splits add their sums with atomics and the last one applies the output stage, which
must leave its sums and counters zero for the next invoke (every case invokes twice or more)."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity, quantized_inputs
from parity import run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

# name: (op, input shape, outputs, filter size (conv), activation, per-channel weights)
CASES = {
    "fc_m1_k150": ("fc", (1, 150), 37, 0, "RELU6", True),
    "fc_m3_k203": ("fc", (3, 203), 20, 0, None, False),
    "conv1x1_c150": ("conv", (1, 7, 7, 150), 40, 1, "RELU6", False),
    "conv3x3_c16": ("conv", (1, 7, 7, 16), 24, 3, "RELU", True),
    "conv3x3_c21": ("conv", (1, 6, 5, 21), 19, 3, None, False),
}


def model(name: str) -> bytes:
    op, shape, n, ks, act, per_channel = CASES[name]
    b = ModelBuilder(seed=n)
    x = b.input("x", shape)
    if op == "fc":
        y = b.fully_connected(x, b.rand((n, shape[-1])), b.rand((n,), 0.3), activation=act)
    else:
        w = b.rand((n, ks, ks, shape[3]))
        y = b.conv2d(x, w, b.rand((n,), 0.3), stride=1, dilation=1, padding="SAME", activation=act)
    b.output(y)
    return quantize_model(b.build(), per_channel=per_channel, io="int8", seed=n, jitter=0.4)


def splitk_kernels(r) -> set[str]:
    kernels = r.delegate.profile().kernels
    split = {k.kernel for k in kernels if "splitk" in k.kernel}
    # The algorithm profiles name says so too.
    assert bool(split) == any("_splitk/" in k.algorithm for k in kernels), kernels
    return split


def one_launch(split: set[str]) -> bool:
    # The last group of each tile applies the output stage: no reduction kernel.
    return len(split) == 1 and split <= {"gemm_int8_splitk", "gemm_int8_im2col_splitk"}


@pytest.mark.parametrize("splits", [2, 3, 5])
@pytest.mark.parametrize("name", CASES)
def test_gemm_int8_split_k(runtime: str, name: str, splits: int) -> None:
    r = check_int8_parity(
        model(name), runtime, min_fraction=1.0, gemm_splits=splits, profiling=True
    )
    assert one_launch(splitk_kernels(r))


@pytest.mark.parametrize("tiles", ["64,64,8,8,4", "8,64,4,2,4", "32,32,16,4,4"])
@pytest.mark.parametrize("name", ["fc_m1_k150", "conv3x3_c16"])
def test_gemm_int8_split_k_tiles(
    runtime: str, name: str, tiles: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The NVIDIA tiles (a K tile of 32: slices of whole K tiles, the last one short), deeper
    # steps, and short row tiles for one-row outputs.
    monkeypatch.setenv("CLGPU_TUNE_GEMM_INT8", tiles)
    r = check_int8_parity(model(name), runtime, min_fraction=1.0, gemm_splits=3, profiling=True)
    assert one_launch(splitk_kernels(r))


def test_gemm_int8_not_split_on_cpu(runtime: str) -> None:
    # Left to itself the plan never splits on a CPU device.
    if clgpu_delegate.load().device.type == "gpu":
        pytest.skip("a GPU splits this GEMM to fill its compute units")
    r = check_int8_parity(model("fc_m1_k150"), runtime, min_fraction=1.0, profiling=True)
    assert not splitk_kernels(r)


def test_gemm_int8_split_k_in_chunks(runtime: str) -> None:
    # A largest allocation of 1 KiB: the chunks shrink until their partial sums fit too.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 8, 8, 16))
    b.output(b.conv2d(x, b.rand((12, 3, 3, 16)), b.rand((12,), 0.2), 1, 1, "SAME", "RELU6"))
    m = quantize_model(b.build(), io="int8", seed=3)
    r = check_int8_parity(
        m, runtime, min_fraction=1.0, max_alloc_bytes=1024, gemm_splits=3, profiling=True
    )
    assert "chunks" in r.decisions[0]["note"]
    assert one_launch(splitk_kernels(r))


@pytest.mark.parametrize("name", ["fc_m1_k150", "conv3x3_c21"])
def test_gemm_int8_split_k_state_is_reset_between_invokes(runtime: str, name: str) -> None:
    # The sums and tile counters live across launches: each invoke, whatever came before, must
    # equal the CPU's result for its own input (stale sums would add the previous invoke's).
    m = model(name)
    ref = make_interpreter(m, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    d = clgpu_delegate.load(gemm_splits=3)
    it = make_interpreter(m, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    details = ref.get_input_details()
    for seed in (1, 2, 1, 3):
        inputs = quantized_inputs(details, seed)
        want, got = run(ref, inputs), run(it, inputs)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)
    assert d.partitions()
