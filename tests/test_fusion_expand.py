"""An inverted-residual block in one launch (AttachExpand, kernels' EXPAND_A): the 1x1
"expand" convolution before a depthwise that is folded into the pointwise GEMM after it is
computed inside that GEMM too, at each depthwise tap, where the repeated products cost less than
a launch (ExpandFoldPays: the layers of small models). Against TFLite's CPU kernels within the
fp32 / fp16 tolerances, with the fold on and off: strides, padding, dilation, 5x5 taps, a
residual ADD, channels not in fours (the scalar loads), fp16 storage, split-K, a resize; and the
graphs that must not fold (the expand's output read elsewhere, an epilogue on it, a layer too
large to repeat, a chain of taps x EC products past the cap where the GEMM would repeat it,
fusion off). int8: bit-exact with
TFLite's integer kernels, the expand's bytes requantized inside the GEMM as its own kernel
stores them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from folds import assert_prepare_refuses, folded_nodes
from folds import launches as _launches
from int8_parity import Int8Result, check_int8_parity
from parity import ParityResult, check_parity, precision_tolerances

from clgpu_delegate.modelgen import ModelBuilder, quantize_model


def _expanded(r: ParityResult | Int8Result) -> int:
    """Convolutions that ran an expand and a depthwise inside."""
    return folded_nodes(r, "+EXPAND")


def block(
    shape: tuple[int, int, int, int],
    *,
    expand: int = 2,
    out: int | None = None,
    k: int = 3,
    kw: int | None = None,
    stride: int = 1,
    dilation: int = 1,
    padding: str = "SAME",
    act: str | None = "RELU6",
    residual: bool = False,
    expand_read_twice: bool = False,
    expand_epilogue: bool = False,
    expand_stride: tuple[int, int] = (1, 1),
    seed: int = 0,
) -> bytes:
    """x -> a first conv (so the block's input is an activation) -> 1x1 expand (act) ->
    depthwise (act) -> 1x1 project [+ the block's input]."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    c = shape[3]
    h = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU")
    e = c * expand
    xe = b.conv2d(h, b.rand((e, 1, 1, c)), b.rand((e,), 0.2), expand_stride, 1, "SAME", act)
    if expand_epilogue:
        xe = b.hard_swish(xe)
    kw = k if kw is None else kw
    d = b.depthwise_conv2d(
        xe, b.rand((1, k, kw, e)), b.rand((e,), 0.2), stride, dilation, padding, 1, act
    )
    y = b.conv2d(d, b.rand((out or c, 1, 1, e)), b.rand((out or c,), 0.2), 1, 1, "SAME")
    if residual:
        y = b.add(y, h)
    b.output(y)
    if expand_read_twice:
        b.output(xe)
    return b.build()


def check_expand(
    model: bytes, runtime: str, expanded: int, precision: str = "fp32", **options: Any
) -> ParityResult:
    common = {"profiling": True, "precision": precision, **precision_tolerances(precision)}
    common.update(options)
    on = check_parity(model, runtime, expect_delegated="all", **common)
    assert _expanded(on) == expanded, on.delegate.profile().table()
    off = check_parity(model, runtime, expect_delegated="all", fuse_add=False, **common)
    assert _expanded(off) == 0
    return on


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 8, 8, 8), {}),
        ((1, 9, 7, 8), {"stride": 2}),
        ((1, 20, 1, 12), {"k": 3, "kw": 1}),  # a keyword spotter's taps along time
        ((1, 6, 6, 6), {"padding": "VALID", "dilation": 2}),  # expand of 12: not in fours
        ((1, 5, 5, 3), {"expand": 3}),  # depthwise of 9 channels: the scalar loads
        ((1, 6, 6, 8), {"k": 5, "act": None}),
        ((2, 4, 4, 8), {"out": 5}),
        ((1, 7, 7, 8), {"residual": True}),
        # A spotter's wide blocks (9 taps, 160-200 expanded channels): up to 8 expands per
        # work-item, the project's weights held in registers; here (a group of 10 rows on a
        # 2-unit device, past the products per work-item a GPU's profile allows: raised) in two
        # passes of equal width.
        ((1, 20, 1, 40), {"expand": 5, "k": 9, "kw": 1}),
        ((1, 20, 1, 40), {"expand": 4, "k": 9, "kw": 1, "residual": True}),
    ],
)
def test_block_runs_as_one_launch(
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int, int, int],
    kw: dict[str, Any],
) -> None:
    monkeypatch.setenv("CLGPU_IR_BLOCK_ITEM", "100000")
    model = block(shape, seed=shape[1] * 7 + shape[3], **kw)
    on = check_expand(model, runtime, 1)
    off = check_parity(model, runtime, expect_delegated="all", profiling=True, fuse_add=False)
    # first conv, block: one launch, against first conv, expand, depthwise, project (and ADD).
    assert _launches(on) == 2
    assert _launches(off) == 4 + (1 if kw.get("residual") else 0)


@pytest.mark.parametrize(
    "shape,kw,env",
    [
        # The GEMM's EXPAND_A, where the block kernel is turned off.
        ((1, 8, 8, 8), {}, {"CLGPU_IR_BLOCK": "0"}),
        ((1, 9, 7, 8), {"stride": 2}, {"CLGPU_IR_BLOCK": "0"}),
        ((1, 7, 7, 8), {"residual": True}, {"CLGPU_IR_BLOCK": "0"}),
        # The block kernel a few expanded channels at a time (strides, dilation, odd channels).
        ((1, 20, 1, 12), {"k": 3, "kw": 1, "residual": True}, {"CLGPU_IR_BLOCK_CHUNK": "8"}),
        ((1, 9, 7, 8), {"stride": 2}, {"CLGPU_IR_BLOCK_CHUNK": "4"}),
        ((1, 6, 6, 6), {"padding": "VALID", "dilation": 2}, {"CLGPU_IR_BLOCK_CHUNK": "8"}),
        ((2, 5, 5, 3), {"expand": 3, "out": 5}, {"CLGPU_IR_BLOCK_CHUNK": "4"}),
    ],
)
def test_block_kernel_and_gemm_agree_with_the_cpu(
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int, int, int],
    kw: dict[str, Any],
    env: dict[str, str],
) -> None:
    """Both kernels that run a folded expand (the inverted-residual block kernel by default, the
    implicit GEMM's EXPAND_A with CLGPU_IR_BLOCK=0), the block kernel also over chunks of the
    expanded channels: one launch, the CPU's values."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    on = check_expand(block(shape, seed=shape[1] * 3 + shape[3], **kw), runtime, 1)
    algorithms = [k.algorithm for k in on.delegate.profile().kernels]
    block_kernel = env.get("CLGPU_IR_BLOCK") != "0"
    assert any(a.startswith("inverted_residual+EXPAND") for a in algorithms) == block_kernel
    assert _launches(on) == 2, algorithms


def test_fp16_storage_and_split_k(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_expand(block((1, 6, 6, 8), residual=True, seed=21), runtime, 1, precision="fp16")
    # Split-K is the GEMM's (the block kernel does not split).
    monkeypatch.setenv("CLGPU_IR_BLOCK", "0")
    check_expand(block((1, 3, 3, 16), out=8, seed=22), runtime, 1, gemm_splits=3)


def test_what_must_not_fold(runtime: str) -> None:
    # The expand's output also leaves the partition.
    check_expand(block((1, 8, 8, 8), expand_read_twice=True, seed=23), runtime, 0)
    # A HARD_SWISH folded into the expand's own kernel (MobileNetV3).
    check_expand(block((1, 8, 8, 8), expand_epilogue=True, seed=24), runtime, 0)
    # A layer large enough that repeating the expand at every tap costs more than its launch.
    check_expand(block((1, 48, 48, 16), expand=6, seed=25), runtime, 0)
    # An expand of stride 2 (a fuzzed keyword spotter's): the depthwise reads every other pixel.
    check_expand(block((1, 8, 7, 8), expand_stride=(2, 1), seed=26), runtime, 0)
    # Over one row a stride down the rows changes nothing: that expand folds.
    check_expand(block((1, 1, 8, 8), expand_stride=(2, 1), seed=27), runtime, 1)


def test_long_tap_chains_fold_only_into_the_block_kernel(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """9 taps of an expand from 25 channels: 225 products per depthwise element, past the chain
    cap of 216 that the GEMM's EXPAND_A repeats at every tap. The block kernel computes the
    expand once per input pixel, so it still takes the block (keyword_spotting_alexa's blocks:
    one launch instead of three); the GEMM does not, unless the cap is raised."""
    model = block((1, 8, 1, 25), k=9, kw=1, expand=1, seed=31)
    on = check_expand(model, runtime, 1)
    assert any(
        k.algorithm.startswith("inverted_residual+EXPAND") for k in on.delegate.profile().kernels
    )
    # Past the products per work-item the device profile allows (here 1): the GEMMs run it.
    monkeypatch.setenv("CLGPU_IR_BLOCK_ITEM", "1")
    check_expand(model, runtime, 0)
    monkeypatch.delenv("CLGPU_IR_BLOCK_ITEM")
    monkeypatch.setenv("CLGPU_IR_BLOCK", "0")
    gemm = check_expand(model, runtime, 0)
    assert folded_nodes(gemm, "+DEPTHWISE") == 1  # the depthwise still folds
    # A higher cap ($CLGPU_EXPAND_CHAIN, read at each prepare) folds the same block.
    monkeypatch.setenv("CLGPU_EXPAND_CHAIN", "225")
    check_expand(model, runtime, 1)
    # 3 taps of the same expand (75) fold under the default.
    monkeypatch.delenv("CLGPU_EXPAND_CHAIN")
    check_expand(block((1, 8, 1, 25), k=3, kw=1, expand=1, seed=32), runtime, 1)


def test_int8_long_tap_chains_fold_only_into_the_block_kernel(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """9 taps of an int8 expand from 28 channels (252 products) are past the GEMM's chain cap,
    but the int8 block kernel computes the expand once per input pixel, so it takes the block
    (the keyword spotters' int8 blocks: one launch instead of two). Without the block kernel
    the expand keeps its launch, and 3 taps of it (84) fold into the GEMM."""
    common: dict[str, Any] = {"min_fraction": 1.0, "profiling": True}

    def model(k: int) -> bytes:
        return quantize_model(
            block((1, 12, 1, 28), k=k, kw=1, expand=1, seed=34), io="int8", seed=34, jitter=0.3
        )

    r = check_int8_parity(model(9), runtime, **common)
    assert _expanded(r) == 1, r.delegate.profile().table()
    assert any(
        k.algorithm.startswith("int8_inverted_residual/") for k in r.delegate.profile().kernels
    )
    # A block whose expand would cost a group's work-items more products each than the device
    # profile allows (here 1) is left to the GEMMs: past the chain cap, two launches.
    monkeypatch.setenv("CLGPU_IR_BLOCK_ITEM", "1")
    r = check_int8_parity(model(9), runtime, **common)
    assert _expanded(r) == 0, r.delegate.profile().table()
    monkeypatch.delenv("CLGPU_IR_BLOCK_ITEM")
    monkeypatch.setenv("CLGPU_IR_BLOCK", "0")
    for k, expanded in ((9, 0), (3, 1)):
        r = check_int8_parity(model(k), runtime, **common)
        assert _expanded(r) == expanded, r.delegate.profile().table()
        assert folded_nodes(r, "+DEPTHWISE") == 1


@pytest.mark.parametrize(
    "var,value,message",
    [
        ("CLGPU_EXPAND_CHAIN", "0", "CLGPU_EXPAND_CHAIN must be a positive integer"),
        ("CLGPU_EXPAND_CHAIN", "216x", "CLGPU_EXPAND_CHAIN must be a positive integer"),
        ("CLGPU_IR_BLOCK", "2", "CLGPU_IR_BLOCK must be 0 or 1"),
        ("CLGPU_IR_BLOCK_CHUNK", "6", "CLGPU_IR_BLOCK_CHUNK must be a positive multiple of 4"),
        ("CLGPU_IR_BLOCK_ITEM", "0", "CLGPU_IR_BLOCK_ITEM must be a positive integer"),
        ("CLGPU_COST_TUNE", "5", "CLGPU_COST_TUNE must be INT8_US,MARGIN"),
        ("CLGPU_COST_TUNE", "5,1.5", "CLGPU_COST_TUNE must be INT8_US,MARGIN"),
        ("CLGPU_COST_TUNE", "0,0.9x", "CLGPU_COST_TUNE must be INT8_US,MARGIN"),
        ("CLGPU_COST_TUNE", "2,0.95,-1", "CLGPU_COST_TUNE must be INT8_US,MARGIN"),
        ("CLGPU_COST_TUNE", "2,0.95,1,1", "CLGPU_COST_TUNE must be INT8_US,MARGIN"),
        ("CLGPU_LAUNCH_US", "8,10,5", "CLGPU_LAUNCH_US must be GEMM,FUSED,SPLIT,SMALL"),
        ("CLGPU_LAUNCH_US", "0,10,5,6", "CLGPU_LAUNCH_US must be GEMM,FUSED,SPLIT,SMALL"),
        ("CLGPU_LAUNCH_US", "8,10,5,1e9", "CLGPU_LAUNCH_US must be GEMM,FUSED,SPLIT,SMALL"),
        ("CLGPU_INVOKE_US", "-1", "CLGPU_INVOKE_US must be a cost in us"),
        ("CLGPU_INVOKE_US", "5,5", "CLGPU_INVOKE_US must be a cost in us"),
    ],
)
def test_bad_research_knobs_are_clear_errors(
    runtime: str, monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    if var == "CLGPU_EXPAND_CHAIN":  # read for the GEMM's EXPAND_A, not the block kernel's
        monkeypatch.setenv("CLGPU_IR_BLOCK", "0")
    # CLGPU_COST_TUNE and CLGPU_LAUNCH_US read for every candidate partition's estimate,
    # CLGPU_EXPAND_CHAIN for its folds.
    assert_prepare_refuses(block((1, 8, 8, 8), seed=33), runtime, message)


def _invoke_in_turns(
    model: bytes, runtime: str, shapes: list[tuple[int, ...]], draw: Any
) -> tuple[Any, list[tuple[np.ndarray, np.ndarray]]]:
    """The model with the delegate and on the CPU, invoked in turns on a fresh input `draw(shape)`
    of each shape (resizing both where it changes): the delegate and (delegate output, CPU
    output) per invoke."""
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    it.allocate_tensors()
    ref.allocate_tensors()
    pairs = []
    for shape in shapes:
        for interp in (it, ref):
            idx = interp.get_input_details()[0]["index"]
            if tuple(interp.get_input_details()[0]["shape"]) != shape:
                interp.resize_tensor_input(idx, shape)
                interp.allocate_tensors()
        x = draw(shape)
        outs = []
        for interp in (it, ref):
            interp.set_tensor(interp.get_input_details()[0]["index"], x)
            interp.invoke()
            outs.append(interp.get_tensor(interp.get_output_details()[0]["index"]).copy())
        pairs.append((outs[0], outs[1]))
    return d, pairs


def test_repeated_invokes_and_a_resize(runtime: str) -> None:
    """Each invoke recomputes from its own input; a resize plans the fold anew."""
    rng = np.random.default_rng(3)
    d, pairs = _invoke_in_turns(
        block((1, 6, 6, 8), residual=True, seed=26),
        runtime,
        [(1, 6, 6, 8), (1, 6, 6, 8), (2, 5, 7, 8), (1, 6, 6, 8)],
        lambda shape: rng.standard_normal(shape).astype(np.float32),
    )
    for got, ref in pairs:
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    assert any("+EXPAND" in k.algorithm for k in d.profile().kernels)


# CLGPU_EXPAND_CHAIN=1: every block past the GEMM's chain cap, so the block kernel takes it.
_BLOCK = {"CLGPU_EXPAND_CHAIN": "1"}
# The int8 GEMM's chain cap as NVIDIA sm_90's profile sets it (cl/device_profile.cc).
_INT8_576 = {"CLGPU_EXPAND_CHAIN_INT8": "576"}


@pytest.mark.parametrize(
    "shape,kw,env,kernel",
    [
        ((1, 8, 8, 8), {}, _BLOCK, "block"),
        ((1, 9, 7, 8), {"stride": 2}, _BLOCK, "block"),
        ((1, 20, 1, 12), {"k": 3, "kw": 1}, _BLOCK, "block"),
        ((1, 6, 6, 8), {"padding": "VALID", "dilation": 2, "act": "RELU"}, _BLOCK, "block"),
        ((2, 4, 4, 8), {"out": 5, "act": None}, _BLOCK, "block"),
        ((1, 7, 7, 8), {"residual": True}, _BLOCK, "block"),
        # A spotter's block (9 taps along time of an expand from 40 channels: past the cap).
        ((1, 20, 1, 40), {"expand": 3, "k": 9, "kw": 1, "residual": True}, {}, "block"),
        # Passes over the expanded channels (capped chunks).
        ((1, 9, 7, 8), {"stride": 2}, {**_BLOCK, "CLGPU_IR_BLOCK_CHUNK": "4"}, "block"),
        (
            (2, 10, 1, 12),
            {"k": 5, "kw": 1, "residual": True},
            {**_BLOCK, "CLGPU_IR_BLOCK_CHUNK": "8"},
            "block",
        ),
        # A longer int8 chain cap (the H200's profile) leaves the block kernel the blocks it
        # plans past the float cap, and folds into the GEMM one it does not plan (9 x 32 taps).
        ((1, 20, 1, 40), {"expand": 3, "k": 9, "kw": 1, "residual": True}, _INT8_576, "block"),
        ((1, 3, 3, 32), {}, {**_INT8_576, "CLGPU_IR_BLOCK_ITEM": "1"}, "gemm"),
        # Under the cap the GEMM's EXPAND_A takes the block.
        ((1, 8, 8, 8), {}, {}, "gemm"),
        ((1, 9, 7, 8), {"stride": 2}, {}, "gemm"),
        ((1, 7, 7, 8), {"residual": True}, {}, "gemm"),
        ((1, 6, 6, 8), {"padding": "VALID", "dilation": 2, "act": "RELU"}, {}, "gemm"),
        ((2, 4, 4, 8), {"out": 5, "act": None}, {}, "gemm"),
    ],
)
def test_int8_block_runs_as_one_launch(
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int, int, int],
    kw: dict[str, Any],
    env: dict[str, str],
    kernel: str,
) -> None:
    """Bit for bit with TFLite's integer kernels: the int8 block kernel (the expand's, the
    depthwise's and the project's requantizations, the residual ADD's rescaling), or the GEMM's
    EXPAND_A."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seed = shape[1] * 5 + shape[3]
    model = quantize_model(block(shape, seed=seed, **kw), io="int8", seed=seed, jitter=0.3)
    common: dict[str, Any] = {"min_fraction": 1.0, "profiling": True}
    on = check_int8_parity(model, runtime, **common)
    assert _expanded(on) == 1, on.delegate.profile().table()
    assert _launches(on) == 2  # the first conv, the block
    prefix = "int8_inverted_residual/" if kernel == "block" else "int8_gemm"
    assert any(k.algorithm.startswith(prefix) for k in on.delegate.profile().kernels), (
        on.delegate.profile().table()
    )
    off = check_int8_parity(model, runtime, fuse_add=False, **common)
    assert _expanded(off) == 0
    assert _launches(off) == _launches(on) + 2 + (1 if kw.get("residual") else 0)


def test_int8_block_kernel_repeated_invokes_and_a_resize(runtime: str) -> None:
    """The int8 block kernel recomputes each invoke from its own input, and a resize of the
    batch plans it anew: bit for bit with the CPU at every shape."""
    model = quantize_model(
        block((1, 20, 1, 40), expand=3, k=9, kw=1, residual=True, seed=44),
        io="int8",
        seed=44,
        jitter=0.3,
    )
    rng = np.random.default_rng(5)
    d, pairs = _invoke_in_turns(
        model,
        runtime,
        [(1, 20, 1, 40), (1, 20, 1, 40), (3, 20, 1, 40), (1, 20, 1, 40)],
        lambda shape: rng.integers(-128, 128, size=shape).astype(np.int8),
    )
    for got, ref in pairs:
        np.testing.assert_array_equal(got, ref)
    assert any(k.algorithm.startswith("int8_inverted_residual/") for k in d.profile().kernels)


def test_int8_what_must_not_fold(runtime: str) -> None:
    common: dict[str, Any] = {"min_fraction": 1.0, "profiling": True}
    # The block's input channels not in fours (the expand's packed rows would be padded).
    m = quantize_model(block((1, 6, 6, 6), expand=2, seed=31), io="int8", seed=31, jitter=0.3)
    assert _expanded(check_int8_parity(m, runtime, **common)) == 0
    # The expand's output also leaves the partition.
    m = quantize_model(
        block((1, 8, 8, 8), expand_read_twice=True, seed=32), io="int8", seed=32, jitter=0.3
    )
    assert _expanded(check_int8_parity(m, runtime, **common)) == 0
    # Too large to repeat at every tap.
    m = quantize_model(block((1, 48, 48, 16), expand=6, seed=33), io="int8", seed=33, jitter=0.3)
    assert _expanded(check_int8_parity(m, runtime, **common)) == 0
    # Past the int8 GEMM's chain cap (9 taps x 32 channels over this device's 216), with no block
    # kernel to take it: two launches (under a cap of 576 it folds, test above).
    m = quantize_model(block((1, 3, 3, 32), seed=36), io="int8", seed=36, jitter=0.3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLGPU_IR_BLOCK_ITEM", "1")
        assert _expanded(check_int8_parity(m, runtime, **common)) == 0
    # An expand of stride 2, and one whose stride a single row makes no stride (that one folds).
    for shape, n, seed in (((1, 8, 7, 8), 0, 34), ((1, 1, 8, 8), 1, 35)):
        f = block(shape, expand_stride=(2, 1), seed=seed)
        m = quantize_model(f, io="int8", seed=seed, jitter=0.3)
        assert _expanded(check_int8_parity(m, runtime, **common)) == n


def test_fuse_option_names_the_passes(runtime: str) -> None:
    """Option `fuse` turns single passes on and off (fusion/pass.h's table): the depthwise pass
    alone folds the depthwise but not the expand; `none` is `fuse_add=False`; a bad name is a
    clear ValueError naming the passes."""
    import clgpu_delegate

    model = block((1, 8, 8, 8), residual=True, seed=41)
    common = {"profiling": True, "expect_delegated": "all"}
    dw = check_parity(model, runtime, fuse="depthwise", **common)
    kernels = dw.delegate.profile().kernels
    assert _expanded(dw) == 0 and any("+DEPTHWISE" in k.algorithm for k in kernels)
    assert not any("+ADD" in k.algorithm for k in kernels)  # the residual pass is off
    both = check_parity(model, runtime, fuse="expand, depthwise,residual", **common)
    assert _expanded(both) == 1 and _launches(both) == 2
    none = check_parity(model, runtime, fuse="none", **common)
    off = check_parity(model, runtime, fuse_add=False, **common)
    assert _launches(none) == _launches(off) == 5
    with pytest.raises(ValueError, match="'fuse'.*clamp, epilogue, residual"):
        clgpu_delegate.load(fuse="depthwise,pad_everything")


def test_readme_names_every_fold_pass() -> None:
    """The README's `fuse` row lists the passes the delegate knows, in the table's order (a
    bad value's error names them)."""
    import re
    from pathlib import Path

    import clgpu_delegate

    with pytest.raises(ValueError) as e:
        clgpu_delegate.load(fuse="no_such_pass")
    known = str(e.value).split("comma-separated list of ")[1].strip().split(", ")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `fuse`, `fuse_add`"))
    listed = re.findall(r"`(\w+)`", row.split("comma-separated:")[1].split("(")[0])
    assert listed == known
