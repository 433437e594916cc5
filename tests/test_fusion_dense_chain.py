"""The dense chain (fusion/dense_chain.cc, kernels/dense_chain_grid.cl): batch-1 FULLY_CONNECTED
layers in a row run by the last in one launch of work-groups that meet at a barrier after each
layer. This machine's device has no figures for it, so the tests turn it on ($CLGPU_DENSE_GRID=1)
and make every layer pay; the groups are at most the device's compute units (PoCL's: its cores).
Against TFLite's CPU kernels: widths and depths, clamps folded or fused, one group and several,
fp16 storage, special values (the sum in TFLite's order where it could saturate), repeated
invokes, a batch resized after the chain formed; what keeps a layer out (K not in fours, a second
reader, a model output, PRELU slopes, two rows); the form off without figures; the cost model's
count; bad knobs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from folds import assert_prepare_refuses, estimated_and_launched, folded_nodes, launches
from parity import ParityResult, check_parity, compare, precision_tolerances, random_inputs, run
from test_fusion_ds_chain import invoke_in_turns
from test_special_values import assert_special_values_match

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# Every pass but this one.
NO_CHAIN = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,ds_chain,depthwise,prelu,requantize,"
    "expand,pool,squeeze_tail,gathers,concat"
)


@pytest.fixture(autouse=True)
def _grid(monkeypatch: pytest.MonkeyPatch) -> None:
    # On, and every layer under the launch it saves.
    monkeypatch.setenv("CLGPU_DENSE_GRID", "1")
    monkeypatch.setenv("CLGPU_DENSE_GRID_US", "0.001,1e5")


def stack(
    shape: tuple[int, ...],
    widths: tuple[int, ...],
    activations: tuple[str | None, ...] = (),
    seed: int = 0,
    relu_nodes: tuple[int, ...] = (),
    prelu_at: int = -1,
    output_at: int = -1,
    softmax: bool = False,
) -> bytes:
    """Dense layers of `widths` on an input of `shape` (flattened by the first), layer i with
    activations[i]; a separate RELU node after the layers in `relu_nodes`, a PRELU after layer
    `prelu_at`, layer `output_at`'s output a model output too; a SOFTMAX at the end."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    k = math.prod(shape) // shape[0] if len(shape) > 1 else shape[0]
    for i, n in enumerate(widths):
        act = activations[i] if i < len(activations) else None
        x = b.fully_connected(x, b.rand((n, k), math.sqrt(2.0 / k)), b.rand((n,), 0.3), act)
        if i in relu_nodes:
            x = b.relu(x)
        if i == prelu_at:
            x = b.prelu(x, b.rand((n,), 0.2))
        if i == output_at:
            b.output(x)
        k = n
    b.output(b.softmax(x) if softmax else x)
    return b.build()


def _kernels(r: ParityResult) -> list[str]:
    return [k.kernel for k in r.delegate.profile().kernels]


def check_chain(
    model: bytes, runtime: str, chained: int, precision: str = "fp32", **options: Any
) -> ParityResult:
    """Parity with the chain on and off; on, `chained` layers ran in the chain's one kernel
    (0: none), as many kernels fewer, less the chain's own."""
    common: dict[str, Any] = {
        "profiling": True,
        "expect_delegated": "all",
        "precision": precision,
        **precision_tolerances(precision),
        **options,
    }
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_CHAIN, **common)
    assert "dense_chain_grid" not in _kernels(off)
    assert _kernels(on).count("dense_chain_grid") == (1 if chained else 0), _kernels(on)
    assert launches(on) == launches(off) - max(chained - 1, 0)
    if chained:
        assert folded_nodes(on, "dense_chain") == 1
    return on


@pytest.mark.parametrize(
    "shape,widths,activations",
    [
        ((1, 16), (32, 8), ("RELU", None)),
        ((1, 64), (128, 128, 10), ("RELU6", "RELU", None)),
        ((1, 260), (36, 1000, 7), ("RELU_N1_TO_1", None, "RELU")),  # K of 260, 36, 1000
        ((1, 256), (512, 512, 256, 16), ("RELU", "RELU", "RELU")),  # groups across the cores
        ((1, 2, 2, 8), (12, 4), ("RELU",)),  # a 4-D input, flattened to one row
    ],
)
def test_chains_agree_with_the_cpu(
    shape: tuple[int, ...],
    widths: tuple[int, ...],
    activations: tuple[str | None, ...],
    runtime: str,
) -> None:
    check_chain(stack(shape, widths, activations, seed=len(widths)), runtime, len(widths))


def test_a_relu_node_and_a_softmax(runtime: str) -> None:
    # The RELU folds into its layer first; the SOFTMAX runs after the chain.
    on = check_chain(
        stack((1, 24), (40, 40, 6), relu_nodes=(0, 1), softmax=True, seed=2), runtime, 3
    )
    assert "softmax_rows" in _kernels(on) or any("softmax" in k for k in _kernels(on))


def test_fp16_storage(runtime: str) -> None:
    check_chain(stack((1, 32), (64, 48, 8), ("RELU", "RELU"), seed=3), runtime, 3, "fp16")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_special_values_through_the_chain(precision: str, runtime: str) -> None:
    runner = assert_special_values_match(
        "fully_connected_x2", "auto", precision, runtime, profiling=True
    )
    assert "dense_chain" in [k.algorithm for k in runner.delegate.profile().kernels]


def test_sums_that_could_saturate_follow_the_cpu(runtime: str) -> None:
    # Each product 1.5e38: TFLite's GEMV sums lanes k % 4, (+a - a) each, to 0; four at a time in
    # index order they reach +-Inf and Inf - Inf is NaN. The kernel sums such columns in
    # TFLite's order (as the small-M GEMM does), so the layer gives 0 and the next its bias.
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 8))
    w = np.tile(np.array([3e37] * 4 + [-3e37] * 4, np.float32), (4, 1))
    h = b.fully_connected(x, w, np.zeros(4, np.float32))
    b.output(b.fully_connected(h, b.rand((4, 4)), b.rand((4,))))
    on = check_chain(b.build(), runtime, 2, inputs=[np.full((1, 8), 5.0, np.float32)])
    assert np.isfinite(on.outputs[0]).all()


def test_repeated_invokes_see_new_inputs(runtime: str) -> None:
    # The barrier's count back at zero after each launch: five invokes of three layers (two
    # barriers) on groups across the cores.
    d = invoke_in_turns(stack((1, 256), (256, 128, 10), ("RELU", "RELU"), seed=5), runtime, 5)
    assert "dense_chain_grid" in [k.kernel for k in d.profile().kernels]


def test_a_batch_resized_after_the_chain_formed(runtime: str) -> None:
    # Batch 1 chains; batches of 3 and 0 run the layers apart (the chain takes one row), and
    # batch 1 again chains: each plan's outputs against the CPU's, none stale.
    model = stack((1, 16), (24, 20, 8), ("RELU", "RELU"), seed=10)
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    index = it.get_input_details()[0]["index"]
    for batch in (1, 3, 0, 1):
        it.resize_tensor_input(index, (batch, 16))
        it.allocate_tensors()
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(ref.get_input_details()[0]["index"], (batch, 16))
        ref.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), seed=batch + 1)
        d.reset_profile()
        got, want = run(it, inputs), run(ref, inputs)
        assert got[0].shape == want[0].shape == (batch, 8)
        compare(got, want, 1e-5, 1e-5, f" (batch {batch})")
        if batch:
            kernels = [k.kernel for k in d.profile().kernels]
            assert ("dense_chain_grid" in kernels) == (batch == 1), (batch, kernels)


@pytest.mark.parametrize(
    "kw,chained",
    [
        ({"shape": (1, 10)}, 2),  # K of 10: the first layer stays out, the other two chain
        ({"output_at": 0}, 2),  # the first layer's output is the model's: the other two chain
        ({"output_at": 1}, 2),  # the second's: the first two chain and write it, the last apart
        ({"prelu_at": 1}, 0),  # slopes on the second: it ends no chain and joins none
        ({"shape": (2, 16)}, 0),  # two rows: the small-M GEMM's
    ],
)
def test_what_keeps_a_layer_out(kw: dict[str, Any], chained: int, runtime: str) -> None:
    kw = {"shape": (1, 16), **kw}  # the parameter's dict is shared by both runtimes' runs
    model = stack(widths=(20, 24, 8), activations=("RELU", None, None), seed=6, **kw)
    check_chain(model, runtime, chained)


def test_off_where_the_device_has_no_figures(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLGPU_DENSE_GRID")
    check_chain(stack((1, 16), (32, 8), ("RELU",), seed=7), runtime, 0)


def test_the_cost_model_counts_one_launch(runtime: str) -> None:
    counts, launched = estimated_and_launched(stack((1, 16), (32, 24, 8), seed=8), runtime)
    assert counts and counts[0] == launched == 1


@pytest.mark.parametrize(
    "var,value,message",
    [
        ("CLGPU_DENSE_GRID", "2", "CLGPU_DENSE_GRID must be 0 or 1"),
        ("CLGPU_DENSE_GRID_US", "5", "CLGPU_DENSE_GRID_US must be STAGE_US,GBPS"),
        ("CLGPU_DENSE_GRID_US", "5,0", "CLGPU_DENSE_GRID_US must be STAGE_US,GBPS"),
    ],
)
def test_bad_knobs_are_clear_errors(
    runtime: str, monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    assert_prepare_refuses(stack((1, 16), (32, 8), seed=9), runtime, message)
