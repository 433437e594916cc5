"""Depthwise-separable chains (fusion/ds_chain.cc, kernels/ds_chain.cl): two or more blocks of a
float depthwise (depth multiplier 1, stride 1, the map's size kept) and a 1x1 convolution run by
one work-group per image in one launch, the activations in local memory. Against TFLite's CPU
kernels within the fp32 tolerances, with the pass on and off: filter sizes, dilation, padding,
activations, batches, widths changing along the chain, a 1x1 whose weights local memory holds in
chunks, repeated invokes; which graphs must not chain (a residual ADD, a stride, VALID padding,
channels not in fours, a tensor read elsewhere, an epilogue); the rule that keeps wide blocks
apart; and the cost model's count of the launch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, launches
from parity import ParityResult, check_parity, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# Every fold pass but the chain's (option `fuse`).
NO_CHAIN = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,depthwise,prelu,requantize,expand,"
    "pool,squeeze_tail,gathers,concat"
)
# Every block pays (research knob: no fixed time, a rate 100x the unit's): the kernel's tests
# on shapes the default rule would keep apart on this device.
ALWAYS = "0,100"


def chain(
    shape: tuple[int, int, int, int],
    widths: tuple[int, ...] = (8, 8, 8),
    *,
    k: int | tuple[int, int] = 3,
    dilation: int = 1,
    padding: str = "SAME",
    dw_act: str | None = "RELU",
    pw_act: str | None = "RELU",
    stride: int = 1,
    stride_at: int = 1,
    residual_at: int = -1,
    output_at: int = -1,
    hard_swish_at: int = -1,
    separate_relu: bool = False,
    stale_rows_at: int = -1,
    seed: int = 0,
) -> bytes:
    """x -> 1x1 conv (RELU: the chain's input is an activation) -> per width w: depthwise (k,
    act) -> 1x1 conv to w (act) [+ the block's input: residual_at] -> output. `output_at`: that
    block's output is also an output of the model; `hard_swish_at`: a HARD_SWISH after that
    block's depthwise; `separate_relu`: each activation a RELU node of its own; `stale_rows_at`:
    that block's depthwise output declared with 3 rows more than it has (TFLite infers it)."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    x = b.conv2d(x, b.rand((c, 1, 1, c), 0.3), b.rand((c,), 0.1), activation="RELU")
    kh, kw = (k, k) if isinstance(k, int) else k
    for i, w in enumerate(widths):
        s = stride if i == stride_at else 1
        d = b.depthwise_conv2d(
            x,
            b.rand((1, kh, kw, c), 0.4),
            b.rand((c,), 0.1),
            s,
            dilation,
            padding,
            1,
            None if separate_relu else dw_act,
        )
        if separate_relu:
            d = b.relu(d)
        if i == stale_rows_at:
            n, h, w_, c_ = b.shape(d)
            b._tensors[d].shape = (n, h + 3, w_, c_)  # noqa: SLF001 - a hostile model
        if i == hard_swish_at:
            d = b.hard_swish(d)
        y = b.conv2d(
            d,
            b.rand((w, 1, 1, c), (2.0 / c) ** 0.5),
            b.rand((w,), 0.1),
            activation=None if separate_relu else pw_act,
        )
        if separate_relu:
            y = b.relu(y)
        if i == residual_at and w == c:
            y = b.add(y, x)
        if i == output_at:
            b.output(y)
        x, c = y, w
    b.output(x)
    return b.build()


def check_chain(
    model: bytes, runtime: str, chained: bool, monkeypatch: pytest.MonkeyPatch | None = None
) -> ParityResult:
    """Parity with the pass on and off (every block made to pay where `monkeypatch` is given);
    on, one node ran the chain's kernel when `chained`, else the invoke launched as off did."""
    if monkeypatch is not None:
        monkeypatch.setenv("CLGPU_DS_CHAIN_US", ALWAYS)
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all"}
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_CHAIN, **common)
    assert folded_nodes(off, "ds_chain") == 0
    assert folded_nodes(on, "ds_chain") == int(chained), on.delegate.profile().table()
    if not chained:
        assert launches(on) == launches(off)
    return on


# Chains both forms' tests run: shape, widths, chain()'s keywords.
SHAPES: list[tuple[tuple[int, int, int, int], tuple[int, ...], dict[str, Any]]] = [
    ((1, 10, 6, 8), (8, 8, 8), {}),
    ((2, 7, 5, 16), (16, 16), {"pw_act": "RELU6"}),  # a batch
    ((1, 12, 4, 12), (12, 12), {"k": 5, "dw_act": None}),
    ((1, 9, 9, 8), (8, 8, 8), {"dilation": 2, "pw_act": None}),
    ((1, 25, 5, 8), (8, 8, 8, 8), {"k": (3, 1)}),  # a spotter's taps along time
    ((1, 8, 8, 8), (16, 4, 12), {}),  # widths changing along the chain
]


@pytest.mark.parametrize(
    "shape,widths,kw",
    [
        *SHAPES,
        ((1, 1, 1, 8), (8, 8), {}),  # one pixel
        ((1, 10, 6, 8), (8, 8, 8), {"separate_relu": True}),  # RELU nodes the clamp pass folds
    ],
)
def test_chains_agree_with_the_cpu(
    shape: tuple[int, int, int, int],
    widths: tuple[int, ...],
    kw: dict[str, Any],
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = chain(shape, widths, seed=shape[1] + len(widths), **kw)
    on = check_chain(model, runtime, True, monkeypatch)
    # The 1x1 before the chain, then the chain: every block ran inside the one launch.
    assert launches(on) == 2


def test_a_1x1_wider_than_local_memory_holds_runs_in_chunks(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 160 pixels x 64 channels fill most of the 44 KB: the 1x1's rows arrive a few at a time.
    check_chain(chain((1, 16, 10, 64), (64, 64), seed=3), runtime, True, monkeypatch)


def invoke_in_turns(model: bytes, runtime: str, invokes: int) -> Any:
    """The model with the delegate (`all`, profiling) and on the CPU, each invoked `invokes`
    times on new inputs, every output within 1e-5 of the CPU's: the delegate."""
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    for seed in range(invokes):
        x = random_inputs(ref.get_input_details(), seed)
        np.testing.assert_allclose(run(it, x)[0], run(ref, x)[0], rtol=1e-5, atol=1e-5)
    return d


def test_repeated_invokes_see_new_inputs(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_DS_CHAIN_US", ALWAYS)
    d = invoke_in_turns(chain((1, 10, 6, 8), seed=5), runtime, 3)
    assert folded_nodes(type("R", (), {"delegate": d})(), "ds_chain") == 1


@pytest.mark.parametrize(
    "kw,chained",
    [
        ({"residual_at": 1}, False),  # the ADD splits three blocks into one and one
        ({"stride": 2}, False),  # the second block's depthwise halves the map
        ({"padding": "VALID"}, False),  # each depthwise shrinks the map
        ({"output_at": 0, "widths": (8, 8)}, False),  # the first block's output is the model's
        ({"output_at": 1}, True),  # the second's: the chain of the first two writes it
        ({"hard_swish_at": 0}, True),  # the first block's epilogue: the other two chain
        ({"residual_at": 2}, True),  # an ADD after the last block: the first two chain
    ],
)
def test_what_must_not_chain(
    kw: dict[str, Any], chained: bool, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw = dict(kw)
    widths = kw.pop("widths", (8, 8, 8))
    check_chain(chain((1, 10, 9, 8), widths, seed=7, **kw), runtime, chained, monkeypatch)


def test_a_chain_is_no_expand_for_the_block_after_it(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The third block's strided depthwise folds into its 1x1's GEMM; the expand pass must not take
    # the chain's last 1x1 as that block's expand (it would drop the blocks the chain runs): found
    # by the fuzzer, a DEPTHWISE_CONV_2D's stride mutated to 3.
    model = chain((1, 9, 9, 8), (8, 8, 8), stride=3, stride_at=2, dilation=2, seed=14)
    on = check_chain(model, runtime, True, monkeypatch)
    assert folded_nodes(on, "+EXPAND") == 0, on.delegate.profile().table()


def test_a_chain_whose_tensors_declare_stale_shapes(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chain's input has other channels than its last 1x1 reads: the op's own input is its
    # block's depthwise output, not the chain's input, wherever its shapes are inferred (the
    # fuzzer's mutants of seed 4702: a RELU's output declared with more rows).
    # That RELU stays on the CPU (its declared output is not its input's shape): the first two
    # blocks chain in the partition before it.
    monkeypatch.setenv("CLGPU_DS_CHAIN_US", ALWAYS)
    model = chain((1, 8, 8, 8), (16, 4, 12), separate_relu=True, stale_rows_at=2, seed=15)
    on = check_parity(model, runtime, profiling=True, expect_cpu={10})
    assert folded_nodes(on, "ds_chain") == 1, on.delegate.profile().table()


def test_channels_not_in_fours_stay_apart(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_chain(chain((1, 8, 6, 6), (6, 6, 6), seed=9), runtime, False, monkeypatch)


def test_the_default_rule_chains_small_blocks_and_keeps_wide_ones_apart(runtime: str) -> None:
    # A block pays where its time in one group is under the launch it saves (DsBlockPays): 8
    # channels on 60 pixels do on this device, 64 channels on 400 do not.
    check_chain(chain((1, 10, 6, 8), seed=11), runtime, True)
    check_chain(chain((1, 20, 20, 64), (64, 64), seed=12), runtime, False)


@pytest.mark.parametrize("separate_relu", [False, True])
def test_the_cost_model_counts_one_launch(separate_relu: bool, runtime: str) -> None:
    model = chain((1, 10, 6, 8), seed=13, separate_relu=separate_relu)
    counts, launched = estimated_and_launched(model, runtime)
    assert counts and counts[0] == launched == 2
