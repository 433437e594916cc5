"""The depthwise-separable chain's grid form (kernels/ds_chain_grid.cl, ops/ds_chain.cc's
PlanDsGrid): the chain in one launch of several work-groups that meet at a barrier after each
block, the activations between blocks in global memory. This machine's device has no figure for
it, so the tests turn it on ($CLGPU_DS_GRID=1) and make it the cheaper form; each group count is
at most the device's compute units (PoCL's: its cores), the plan's rule that keeps every group
resident. Against TFLite's CPU kernels within the fp32 / fp16 tolerances: one group and two, a
batch, filter sizes, dilation, widths changing along the chain, one pixel, repeated invokes (the
barrier's counters carried from one to the next); the group form where the grid form is off; the
cost model's count; bad knobs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from folds import assert_prepare_refuses, estimated_and_launched, folded_nodes, launches
from parity import ParityResult, check_parity, precision_tolerances
from test_fusion_ds_chain import NO_CHAIN, SHAPES, chain, invoke_in_turns

from clgpu_delegate._native import native


@pytest.fixture(autouse=True)
def _grid(monkeypatch: pytest.MonkeyPatch) -> None:
    # On, and cheaper than the group form and than the launches it saves.
    monkeypatch.setenv("CLGPU_DS_GRID", "1")
    monkeypatch.setenv("CLGPU_DS_GRID_US", "0.001,0.001")


def _kernels(r: ParityResult) -> list[str]:
    return [k.kernel for k in r.delegate.profile().kernels]


def check_grid(model: bytes, runtime: str, precision: str = "fp32") -> ParityResult:
    """Parity with the chain on (the grid kernel ran it) and off."""
    common: dict[str, Any] = {
        "profiling": True,
        "expect_delegated": "all",
        "precision": precision,
        **precision_tolerances(precision),
    }
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=NO_CHAIN, **common)
    assert folded_nodes(off, "ds_chain") == 0
    assert folded_nodes(on, "ds_chain") == 1, on.delegate.profile().table()
    assert "ds_chain_grid" in _kernels(on), _kernels(on)
    # The 1x1 before the chain, then the chain.
    assert launches(on) == 2
    return on


def _pixels_for(shape: tuple[int, ...], groups: int) -> str:
    units = native.select_device().compute_units
    return str(math.ceil(shape[0] * shape[1] * shape[2] / min(groups, units)))


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize(
    "shape,widths,kw",
    [*SHAPES, ((1, 5, 5, 64), (64, 64, 64), {})],  # the last: lanes over 64 channels
)
def test_grid_chains_agree_with_the_cpu(
    shape: tuple[int, int, int, int],
    widths: tuple[int, ...],
    kw: dict[str, Any],
    groups: int,
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLGPU_DS_GRID_PIXELS", _pixels_for(shape, groups))
    check_grid(chain(shape, widths, seed=shape[1] + len(widths) + groups, **kw), runtime)


def test_one_pixel_and_the_planned_groups(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_grid(chain((1, 1, 1, 8), (8, 8), seed=2), runtime)
    # The plan's own pixels per group (no knob): as many groups as the figures like, at most
    # the units.
    check_grid(chain((1, 16, 10, 64), (64, 64), seed=3), runtime)


def test_fp16_storage(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_DS_GRID_PIXELS", _pixels_for((1, 10, 6, 8), 2))
    check_grid(chain((1, 10, 6, 16), (16, 16, 16), seed=4), runtime, precision="fp16")


def test_repeated_invokes_see_new_inputs(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The barrier's count is back at zero after each launch and its generation carries on: five
    # invokes, three blocks (two barriers) each, on two groups.
    monkeypatch.setenv("CLGPU_DS_GRID_PIXELS", _pixels_for((1, 10, 6, 8), 2))
    d = invoke_in_turns(chain((1, 10, 6, 8), seed=5), runtime, 5)
    assert "ds_chain_grid" in [k.kernel for k in d.profile().kernels]


def test_the_group_form_where_the_grid_form_is_off(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLGPU_DS_GRID", "0")
    monkeypatch.setenv("CLGPU_DS_CHAIN_US", "0,100")
    on = check_parity(chain((1, 10, 6, 8), seed=6), runtime, profiling=True, expect_delegated="all")
    assert _kernels(on).count("ds_chain") == 1 and "ds_chain_grid" not in _kernels(on)


def test_the_cost_model_counts_one_launch(runtime: str) -> None:
    counts, launched = estimated_and_launched(chain((1, 10, 6, 8), seed=13), runtime)
    assert counts and counts[0] == launched == 2


@pytest.mark.parametrize(
    "var,value,message",
    [
        ("CLGPU_DS_GRID", "2", "CLGPU_DS_GRID must be 0 or 1"),
        ("CLGPU_DS_GRID_US", "5", "CLGPU_DS_GRID_US must be STAGE_US,STEP_US"),
        ("CLGPU_DS_GRID_US", "5,0", "CLGPU_DS_GRID_US must be STAGE_US,STEP_US"),
        ("CLGPU_DS_GRID_PIXELS", "0", "CLGPU_DS_GRID_PIXELS must be a positive integer"),
    ],
)
def test_bad_knobs_are_clear_errors(
    runtime: str, monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    assert_prepare_refuses(chain((1, 10, 6, 8), seed=8), runtime, message)
