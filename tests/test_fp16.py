"""precision="fp16" (half storage, float accumulation) against the fp32 CPU reference on
the per-op grids, at 1e-2 of each output's range."""

from __future__ import annotations

import numpy as np
import pytest
from parity import CONV_ALGORITHMS, check_parity, random_inputs
from test_add import CASES as ADD_CASES
from test_add import add_model
from test_concat import CASES as CONCAT_CASES
from test_concat import concat_model
from test_conv2d import (
    BLOCKED_KNOBS,
    FUSED_KNOBS,
    conv_model,
    set_blocked_knobs,
    set_fused_knobs,
)
from test_conv2d import CASES as CONV_CASES
from test_depthwise_conv2d import CASES as DW_CASES
from test_depthwise_conv2d import depthwise_model
from test_fully_connected import CASES as FC_CASES
from test_fully_connected import fc_model
from test_pool import CASES as POOL_CASES
from test_pool import pool_model
from test_resize import FLAGS as RESIZE_FLAGS
from test_resize import NEAREST_FLAGS, resize_model
from test_resize import SHAPES as RESIZE_SHAPES
from test_transpose import CASES as TRANSPOSE_CASES
from test_transpose import transpose_model

from clgpu_delegate.runtime import make_interpreter

RTOL = 1e-2


def check_fp16(model: bytes, runtime: str, **options: object) -> None:
    # Half storage rounds every stored value to 11 significant bits: the error scales with
    # the output's range, so the absolute tolerance is 1e-2 of it.
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 0)
    for d, x in zip(ref.get_input_details(), inputs, strict=True):
        ref.set_tensor(d["index"], x)
    ref.invoke()
    peak = max(
        float(np.abs(ref.get_tensor(d["index"])).max(initial=0.0)) for d in ref.get_output_details()
    )
    check_parity(
        model,
        runtime,
        inputs=inputs,
        rtol=RTOL,
        atol=RTOL * max(peak, 1e-3),
        expect_delegated="all",
        precision="fp16",
        **options,
    )


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS)
@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_conv2d_fp16(case, algorithm: str, runtime: str) -> None:
    check_fp16(conv_model(case), runtime, conv_algorithm=algorithm)


@pytest.mark.parametrize("knobs", BLOCKED_KNOBS.values(), ids=BLOCKED_KNOBS.keys())
@pytest.mark.parametrize(
    "name", ["3x3_c8_oc33_wide", "1x1_batch2_c64_oc48_nobias", "9x9_s1_c4_oc3"]
)
def test_conv2d_blocked_fp16(
    name: str, knobs: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half loads and stores of whole float4 runs (C and OC multiples of 4) and their scalar tails.
    set_blocked_knobs(monkeypatch, knobs)
    check_fp16(conv_model(CONV_CASES[name]), runtime, conv_algorithm="direct_blocked")


@pytest.mark.parametrize("knobs", FUSED_KNOBS.values(), ids=FUSED_KNOBS.keys())
@pytest.mark.parametrize("name", ["3x3_c6_oc37_valid", "7x7_s1_c9_oc33", "3x3_c16_oc16_batch2"])
def test_conv2d_winograd4_fused_fp16(
    name: str, knobs: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half input and output around float transforms, float U and float accumulators.
    set_fused_knobs(monkeypatch, knobs)
    check_fp16(conv_model(CONV_CASES[name]), runtime, conv_algorithm="winograd4_fused")


@pytest.mark.parametrize("case", DW_CASES.values(), ids=DW_CASES.keys())
def test_depthwise_conv2d_fp16(case, runtime: str) -> None:
    check_fp16(depthwise_model(case), runtime)


@pytest.mark.parametrize("case", FC_CASES.values(), ids=FC_CASES.keys())
def test_fully_connected_fp16(case, runtime: str) -> None:
    check_fp16(fc_model(case), runtime)


@pytest.mark.parametrize("case", ADD_CASES.values(), ids=ADD_CASES.keys())
def test_add_fp16(case, runtime: str) -> None:
    check_fp16(add_model(case), runtime)


@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
def test_transpose_fp16(shape, perm, runtime: str) -> None:
    check_fp16(transpose_model(shape, perm), runtime)


@pytest.mark.parametrize("case", CONCAT_CASES.values(), ids=CONCAT_CASES.keys())
def test_concat_fp16(case, runtime: str) -> None:
    check_fp16(concat_model(case), runtime)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES.values(), ids=POOL_CASES.keys())
def test_pool_fp16(case, kind: str, runtime: str) -> None:
    check_fp16(pool_model(case, kind), runtime)


@pytest.mark.parametrize(
    ("kind", "align", "half"),
    [("nearest", a, h) for a, h in NEAREST_FLAGS] + [("bilinear", a, h) for a, h in RESIZE_FLAGS],
)
@pytest.mark.parametrize("case", RESIZE_SHAPES.values(), ids=RESIZE_SHAPES.keys())
def test_resize_fp16(case, kind: str, align: bool, half: bool, runtime: str) -> None:
    check_fp16(resize_model(case, kind, align, half), runtime)
