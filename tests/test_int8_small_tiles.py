"""The int8 GEMMs' small tiles (ops/gemm_int8.cc's Tiles: the device profile's "gemm_int8_small"
where the tuned tiles leave compute units without a group): bit for bit against TFLite's int8
kernels in each mode of the rule ($CLGPU_INT8_SMALL_TILES 0-3), for the 1x1 GEMM, the
implicit GEMM, FULLY_CONNECTED and a folded depthwise (with its residual ADD). This machine's
profile has no small row, so the rows are given here ($CLGPU_TUNE_GEMM_INT8_SMALL): the H200's,
16 x 16, and 8 x 16 with two columns per work-item. The layers have one group of the tuned tiles
and more of the small ones, so the rule takes them (all but one that has one group either way)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import RUNTIMES
from int8_parity import check_int8_parity
from test_conv2d_int8 import conv_model
from test_fusion_depthwise import block

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

SMALL_ROWS = ["16,16,8,1,1", "16,32,8,1,2", "8,16,4,1,2"]


def _fc(shape: tuple[int, ...], n: int, seed: int) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    b.output(b.fully_connected(x, b.rand((n, shape[-1])), b.rand((n,), 0.3), activation="RELU"))
    return quantize_model(b.build(), per_channel=True, io="int8", seed=seed, jitter=0.4)


MODELS: dict[str, Any] = {
    "conv3x3": lambda: conv_model(((1, 4, 5, 8), (16, 3, 3), 1, 1, "SAME", "RELU6"), True, 1),
    "conv1x1": lambda: conv_model(((1, 5, 6, 12), (24, 1, 1), 1, 1, "VALID", None), True, 2),
    "conv_odd_c": lambda: conv_model(((1, 9, 9, 5), (7, 3, 3), 2, 1, "SAME", "RELU"), False, 3),
    "fc": lambda: _fc((24, 64), 10, 4),
    "fc_batch": lambda: _fc((2, 13, 37), 29, 5),
    "dw_fold": lambda: block((1, 5, 6, 16), out=24, seed=6),
    "dw_fold_residual": lambda: block((1, 6, 5, 16), out=16, residual=True, k=5, seed=7),
    # One group in either tiles: the rule leaves it the tuned (short-K) row.
    "dw_fold_4x4": lambda: block((1, 4, 4, 16), out=24, seed=8),
}


@pytest.mark.parametrize("row", SMALL_ROWS)
@pytest.mark.parametrize("mode", ["0", "1", "2", "3"])
@pytest.mark.parametrize("name", list(MODELS))
def test_small_tiles_are_bit_exact(
    runtime: str, monkeypatch: pytest.MonkeyPatch, name: str, mode: str, row: str
) -> None:
    monkeypatch.setenv("CLGPU_TUNE_GEMM_INT8_SMALL", row)
    monkeypatch.setenv("CLGPU_INT8_SMALL_TILES", mode)
    check_int8_parity(MODELS[name](), runtime, min_fraction=1.0)


def test_the_knob_is_checked(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_INT8_SMALL_TILES", "4")
    with pytest.raises(Exception, match="CLGPU_INT8_SMALL_TILES"):
        check_int8_parity(MODELS["fc"](), runtime, min_fraction=1.0)


@pytest.mark.parametrize(
    "name,mode,tm",
    [
        ("dw_fold", "3", 16),  # a folded depthwise: more groups in the small tiles
        ("dw_fold_4x4", "3", 32),  # one group either way: the tuned row
        ("conv1x1", "3", 32),  # a plain GEMM: not in mode 3
        ("conv1x1", "1", 16),
    ],
)
def test_the_rule_picks_the_tiles(name: str, mode: str, tm: int) -> None:
    """The tiles the GEMM's program is built with, read from the build's debug log in a fresh
    process (this one's programs may be cached)."""
    script = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_int8_small_tiles import MODELS\n"
        "from int8_parity import check_int8_parity\n"
        f"check_int8_parity(MODELS[{name!r}](), {RUNTIMES[0]!r}, min_fraction=1.0)\n"
    )
    env = {
        **os.environ,
        "CLGPU_LOG": "debug",
        "CLGPU_PARTITIONING": "all",
        "CLGPU_TUNE_GEMM_INT8_SMALL": "16,32,8,1,2",
        "CLGPU_INT8_SMALL_TILES": mode,
    }
    r = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    built = set(re.findall(r"gemm_int8 \[-DSTORAGE_INT8 -DTM=(\d+)", r.stderr))
    assert built == {str(tm)}, r.stderr[-2000:]
