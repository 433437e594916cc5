"""An int8 squeeze (a whole-image AVERAGE_POOL_2D or MEAN with its dense ops and SOFTMAX folded
in, fusion/squeeze.cc) run at the end of the int8 CONV_2D before it (fusion/squeeze_tail.cc,
kernels/gemm_int8.cl's TAIL_SQUEEZE): each tile of the conv's GEMM adds its column sums, the last
one runs the head, and the conv's output is never written. A classifier's last layer and head in
one launch. Bit-exact against TFLite's int8 kernels with the pass on and off: pool and MEAN heads,
one and two dense ops, with and without SOFTMAX, a 3x3 and a 1x1 conv, a folded depthwise, split
K and several invokes (the sums and counter left zero for the next); not folded where the conv's
output has another reader or leaves the partition, or the conv runs the direct kernel; the cost
model still counts the head as a launch (its device time stays on the invoke's path)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, launches
from int8_parity import Int8Result, check_int8_parity, quantized_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

NO_TAIL = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,ds_chain,depthwise,prelu,requantize,"
    "expand,pool,gathers,concat"
)


def head_model(
    shape: tuple[int, int, int, int],
    *,
    kernel: int = 3,
    width: int = 24,
    head: str = "pool",
    dense: tuple[int, ...] = (12,),
    softmax: bool = True,
    depthwise: bool = False,
    extra: str | None = None,
    seed: int = 0,
) -> bytes:
    """[conv] -> [depthwise ->] conv (RELU) -> whole-image pool or MEAN -> dense ops ->
    [SOFTMAX]: a keyword spotter's or small classifier's last block and head."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    if depthwise:
        x = b.conv2d(x, b.rand((width, 3, 3, c)), b.rand((width,), 0.2), 1, 1, "SAME", "RELU")
        x = b.depthwise_conv2d(x, b.rand((1, 3, 3, width)), b.rand((width,), 0.2),
                               activation="RELU")
        c, kernel = width, 1
    y = b.conv2d(x, b.rand((width, kernel, kernel, c)), b.rand((width,), 0.2), 1, 1, "SAME",
                 "RELU")
    _, h, w, _ = b.shape(y)
    if head == "pool":
        m = b.reshape(b.avg_pool2d(y, (h, w), 1), (1, width))
    else:
        m = b.mean(y, [1, 2], keep_dims=False)
    for n in dense:
        k = b.shape(m)[-1]
        m = b.fully_connected(m, b.rand((n, k)), b.rand((n,), 0.2))
    if softmax:
        m = b.softmax(m)
    if extra == "second_reader":
        b.output(b.add(y, b.rand((width,))))
    elif extra == "output":
        b.output(y)
    b.output(m)
    return quantize_model(b.build(), io="int8", seed=seed, jitter=0.3)


def _tails(r: Int8Result) -> int:
    return folded_nodes(r, "+SQUEEZE")


def check_tail(model: bytes, runtime: str, folded: int, **options: Any) -> Int8Result:
    common = {"min_fraction": 1.0, "max_quanta": 0, "profiling": True, **options}
    on = check_int8_parity(model, runtime, **common)
    off = check_int8_parity(model, runtime, **common, fuse=NO_TAIL)
    assert _tails(off) == 0
    assert _tails(on) == folded, on.delegate.profile().table()
    assert launches(on) == launches(off) - folded, on.delegate.profile().table()
    return on


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"head": "mean"},
        {"softmax": False},
        {"dense": (16, 12)},
        {"kernel": 1},
        {"head": "mean", "dense": (8, 24), "softmax": False},
    ],
    ids=["pool_softmax", "mean", "no_softmax", "two_dense", "1x1", "mean_two_dense"],
)
def test_squeeze_folds_into_the_int8_conv(runtime: str, kwargs: dict[str, Any]) -> None:
    check_tail(head_model((1, 13, 7, 8), seed=len(kwargs), **kwargs), runtime, 1)


def test_squeeze_after_a_folded_depthwise_with_split_k(runtime: str, monkeypatch: Any) -> None:
    # A DS-CNN's last block: the depthwise computed where the GEMM loads A, K split three ways,
    # the last split of each tile adding the column sums.
    monkeypatch.setenv("CLGPU_TRIAL_DW_FOLD_ALWAYS", "1")
    r = check_tail(head_model((1, 25, 5, 4), depthwise=True, width=64, seed=5), runtime, 1,
                   gemm_splits=3)
    algorithms = [k.algorithm for k in r.delegate.profile().kernels]
    assert any("_splitk/" in a and a.endswith("+DEPTHWISE+SQUEEZE") for a in algorithms), algorithms


def test_many_tiles_add_their_sums(runtime: str) -> None:
    # More pixels and channels than one tile: every tile's sums count, the last one's head.
    check_tail(head_model((1, 40, 20, 8), width=72, dense=(20,), seed=6), runtime, 1)


@pytest.mark.parametrize("extra", ["second_reader", "output"])
def test_squeeze_that_does_not_fold(runtime: str, extra: str) -> None:
    check_tail(head_model((1, 9, 7, 8), extra=extra, seed=7), runtime, 0)


def test_direct_conv_does_not_fold(runtime: str) -> None:
    r = check_int8_parity(
        head_model((1, 9, 7, 8), seed=8),
        runtime,
        min_fraction=1.0,
        max_quanta=0,
        profiling=True,
        conv_algorithm="direct",
    )
    assert _tails(r) == 0


def test_the_estimate_still_counts_the_head(runtime: str) -> None:
    # The head's device time stays on the invoke's path (fusion/squeeze_tail.cc's Find): the
    # estimate counts it as the launch it was.
    model = head_model((1, 13, 7, 8), seed=9)
    estimated, launched = estimated_and_launched(model, runtime)
    assert set(estimated) == {launched + 1}, (estimated, launched)


def test_each_invoke_starts_from_zero_sums(runtime: str) -> None:
    # The last tile takes the sums and resets the counter: invoke after invoke on new inputs,
    # each output is that input's (a stale sum or count would carry the last one's over).
    model = head_model((1, 13, 7, 8), dense=(10,), seed=10)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    dev = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref.allocate_tensors()
    dev.allocate_tensors()
    for seed in range(4):
        inputs = quantized_inputs(ref.get_input_details(), seed)
        np.testing.assert_array_equal(run(dev, inputs)[0], run(ref, inputs)[0])
    assert any(k.algorithm.endswith("+SQUEEZE") for k in d.profile().kernels)
