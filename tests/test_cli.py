"""The user-facing commands: `bench` (the README's main job) with its JSON report and
plot, `bench --check-precision`, and check_precision()'s per-node table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder


def test_bench_with_no_model_runs_the_default(run_python, tmp_path: Path) -> None:
    out = run_python(
        ["-m", "clgpu_delegate", "bench", "--runs", "3", "--json", str(tmp_path / "r.json")],
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "model mobilenet_v2" in out.stdout and "median ms" in out.stdout, out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    cpu, delegate = report["results"]
    assert cpu["runs"] == 3 and delegate["runs"] == 3
    assert delegate["max_rel_diff"] < 1e-4
    assert report["device"] and report["driver"]


def test_bench_all_partitions_with_profile_and_plot(run_python, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = run_python(
        [
            "-m",
            "clgpu_delegate",
            "bench",
            "--model",
            "lenet5",
            "--runs",
            "2",
            "--partitioning",
            "all",
            "--profile",
            "--plot",
            str(tmp_path / "p.png"),
        ]
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "top ops:" in out.stdout and "CONV_2D" in out.stdout
    # The profile comes from a delegate of its own, set against the unprofiled invokes.
    assert re.search(r"kernels \d+\.\d+ ms per invoke = \d+% of the median", out.stdout)
    assert (tmp_path / "p.png").stat().st_size > 1000


def _small_model() -> bytes:
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 12, 12, 6))
    y = b.conv2d(x, b.rand((8, 3, 3, 6)), activation="RELU")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 8), scale=0.5))
    y = b.mul(y, 0.5)
    b.output(b.fully_connected(y, b.rand((5, 8)), keep_num_dims=True))
    return b.build()


def test_check_precision_reports_every_delegated_node() -> None:
    report = clgpu_delegate.check_precision(_small_model())
    ops = ["CONV_2D", "DEPTHWISE_CONV_2D", "MUL", "FULLY_CONNECTED"]
    assert [n.op for n in report.nodes] == ops
    compared = [n for n in report.nodes if not n.no_reference]
    # The depthwise output feeds a MUL that the CPU reference runs in place: no reference value
    # survives.
    assert [n.op for n in compared] == ["CONV_2D", "MUL", "FULLY_CONNECTED"]
    for n in compared:
        assert n.errors["fp32"][1] < 1e-4, n
        assert n.errors["fp16"][1] < 1e-2, n
    assert report.outputs["fp16"][1] < 1e-2
    table = report.table()
    assert "fp16 rel" in table and "DEPTHWISE_CONV_2D" in table


def test_bench_check_precision_flag(run_python) -> None:
    out = run_python(
        ["-m", "clgpu_delegate", "bench", "--model", "lenet5", "--runs", "1", "--check-precision"]
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fp32 abs" in out.stdout and "model outputs:" in out.stdout
