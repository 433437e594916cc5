"""The GEMM tile knobs the GPU table uses (kernels/gemm_tiles.cl: double-buffered local memory,
the three tile-move orders, local-row padding, whole-tile builds without bounds checks), forced
through CLGPU_TUNE_<NAME> on every GEMM-family kernel (FULLY_CONNECTED, 1x1 GEMM, implicit GEMM,
the Winograd GEMMs): the CPU device's own table entries use none of them, so without these tests
the GPU code paths would run only on a GPU."""

from __future__ import annotations

import pytest
from parity import check_parity
from test_conv2d import Conv, conv_model
from test_fully_connected import FC, fc_model

from clgpu_delegate._native import core

# TM,TN,TK,WM,WN,DBUF,TMAP,LPAD
KNOBS = {
    "dbuf_lpad4": "32,32,16,4,4,1,0,4",
    "dbuf_tmap2": "64,32,8,4,4,1,2,4",
    "tmap1": "32,64,16,4,4,0,1,0",
    "tmap1_dbuf_wide": "32,64,16,4,8,1,1,0",
    "wide_dbuf_tmap2": "64,64,16,8,4,1,2,0",
}
ENTRIES = ["GEMM", "GEMM_BIG", "GEMM_SMALL", "IGEMM", "IGEMM_BIG", "IGEMM_THIN", "WINOGRAD_GEMM",
           "WINOGRAD_GEMM_BIG", "WINOGRAD_GEMM_THIN", "WINOGRAD_GEMM_WIDE",
           "WINOGRAD_GEMM_BIG_WIDE", "WINOGRAD_GEMM_THIN_WIDE"]

FC_CASES = {
    "ragged": FC((37, 45), 29, 45, activation="RELU"),
    "whole_tiles": FC((128, 64), 128, 64),  # GEMM_EVEN: no bounds checks
    "k_not_multiple_of_4": FC((70, 33), 66, 33),  # scalar tile moves
}
CONV_CASES = {
    "1x1_gemm": (Conv((1, 8, 8, 64), 64, (1, 1)), "gemm"),
    "3x3_implicit_gemm": (Conv((1, 9, 11, 20), 36, (3, 3), activation="RELU"), "implicit_gemm"),
    "3x3_winograd4": (Conv((1, 12, 13, 24), 40, (3, 3)), "winograd4"),
    "5x5_winograd4": (Conv((1, 11, 10, 16), 33, (5, 5), activation="RELU6"), "winograd4"),
    "3x3_winograd2": (Conv((1, 10, 9, 18), 20, (3, 3)), "winograd"),
}


@pytest.fixture(params=KNOBS.values(), ids=KNOBS.keys())
def knobs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # The table is read at every prepare, so the override applies to the next delegate.
    for name in ENTRIES:
        monkeypatch.setenv(f"CLGPU_TUNE_{name}", request.param)
    return request.param


@pytest.mark.parametrize("case", FC_CASES.values(), ids=FC_CASES.keys())
def test_fc_with_gemm_knobs(case: FC, knobs: str, runtime: str) -> None:
    check_parity(fc_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_conv_with_gemm_knobs(case: tuple[Conv, str], knobs: str, runtime: str) -> None:
    conv, algorithm = case
    result = check_parity(conv_model(conv), runtime, expect_delegated="all",
                          conv_algorithm=algorithm, profiling=True)
    assert algorithm in {k.algorithm for k in result.delegate.profile().kernels}


# Recorded as a PoCL 3.1 failure (wrong Winograd results with these single-buffered 8-wide
# tiles; FULLY_CONNECTED with the same tiles was right) until the Winograd GEMM became a program
# of its own; since then it matches the CPU, and this keeps it so.
def test_single_buffered_wide_runs_on_pocl(monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    if "Portable Computing Language" not in core().KernelRunner("auto").device["platform"]:
        pytest.skip("a PoCL case")
    for name in ("WINOGRAD_GEMM", "WINOGRAD_GEMM_WIDE"):  # whichever the layer's size picks
        monkeypatch.setenv(f"CLGPU_TUNE_{name}", "32,64,16,4,8,0,0,0")
    check_parity(conv_model(Conv((1, 12, 13, 24), 40, (3, 3))), runtime,
                 expect_delegated="all", conv_algorithm="winograd4")


def test_build_log_is_readable() -> None:
    # bench/tune_gemm.py reads registers and spills from it (NVIDIA: -cl-nv-verbose).
    defines = "-DTILE_M=32 -DTILE_N=32 -DWPT_M=4 -DWPT_N=4"
    log = core().KernelRunner("auto").build_log("gemm", defines)
    assert isinstance(log, str)
