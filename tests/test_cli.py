"""The user-facing commands: `bench` (the README's main job) with its JSON report and plot,
what it says when the delegate runs nothing or the timings spread, `bench --check-precision`,
`inspect`'s defaults, `models` / `model` / `--version` / `--help`, and check_precision()'s
per-node table. Bad input: test_cli_errors.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import clgpu_delegate
from clgpu_delegate.bench_report import format_report, timing_warnings
from clgpu_delegate.modelgen import ModelBuilder, zoo


def _cli(run_python, *args: str, **kw):
    return run_python(["-m", "clgpu_delegate", *args], **kw)


def _assert_nothing_delegated(stdout: str, report: dict) -> None:
    """The bench says that nothing ran on the device, why, and how to exercise it."""
    n = report["results"][1]["total_nodes"]
    line = (
        f"delegated 0 of {n} nodes: the cost model declines {n} on a CPU OpenCL device, where "
        "TFLite's own CPU kernels are faster; try --partitioning all to exercise the delegate"
    )
    assert line in stdout, stdout
    assert report["delegation"] == line
    assert "no speed-up to report: the delegate ran nothing" in stdout
    assert "speed-up over CPU" not in stdout
    assert report["speedup"] is None and report["speedup_min"] is None


def test_bench_with_no_model_runs_the_default(run_python, tmp_path: Path) -> None:
    # As in a user's shell: load()'s default partitioning (the tests' conftest sets "all").
    out = run_python(
        ["-m", "clgpu_delegate", "bench", "--runs", "3", "--json", str(tmp_path / "r.json")],
        env={"CLGPU_PARTITIONING": None},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "model mobilenet_v2" in out.stdout and "median ms" in out.stdout, out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    cpu, delegate = report["results"]
    assert cpu["runs"] == 3 and delegate["runs"] == 3
    assert delegate["max_rel_diff"] < 1e-4
    assert report["device"] and report["driver"]
    assert report["delegate_options"]["partitioning"] == "cost"
    assert "warning: only 3 timed run(s) per row" in out.stdout
    if report["device_type"] == "cpu":  # the cost model declines everything there
        _assert_nothing_delegated(out.stdout, report)


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
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "top ops:" in out.stdout and "CONV_2D" in out.stdout
    # The profile comes from a delegate of its own, set against the unprofiled invokes.
    line = r"kernels \d+\.\d+ ms per invoke = \d+% of the median"
    assert re.search(line, out.stdout)
    assert (tmp_path / "p.png").stat().st_size > 1000
    # A busy host's event overhead can cover lenet5's kernels whole: a share of 0 is still said.
    report = json.loads((tmp_path / "r.json").read_text())
    report["kernel_ms_per_invoke"] = report["kernel_share_of_invoke"] = 0.0
    assert re.search(line.replace(r"\d+%", "0%"), format_report(report))


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


def test_bench_check_precision_flag_and_json(run_python, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    args = ["bench", "lenet5", "--runs", "1", "--check-precision", "--partitioning", "all"]
    out = _cli(run_python, *args, "--json", str(path), "-o", "zero_copy=off")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fp32 abs" in out.stdout and "model outputs:" in out.stdout
    report = json.loads(path.read_text())
    # What was run: the command, the runtime actually used, the options and the checks.
    assert report["command"] == [
        "clgpu-delegate",
        *args,
        "--json",
        str(path),
        "-o",
        "zero_copy=off",
    ]
    assert report["runtime"] in ("tflite_runtime", "ai_edge_litert")
    assert report["delegate_options"]["partitioning"] == "all"
    assert report["delegate_options"]["zero_copy"] == "off"
    assert report["model_source"] == "built-in" and report["runs"] == 1
    assert report["results"][1]["delegated_nodes"] == report["results"][1]["total_nodes"] == 9
    if report["device_type"] == "cpu":  # the device's threads share the cores: rows in blocks
        assert report["timing"] == "blocks" and "timed in blocks, every CPU run first" in out.stdout
    checked = report["check_precision"]
    assert checked["precisions"] == ["fp32", "fp16"]
    assert [n["op"] for n in checked["nodes"]][:2] == ["CONV_2D", "AVERAGE_POOL_2D"]
    assert checked["outputs"]["fp16"][1] < 1e-2


def test_bench_says_when_nothing_is_delegated(run_python, tmp_path: Path) -> None:
    pytest.importorskip("tflite_runtime.interpreter", reason="tflite_runtime is not installed")
    path = tmp_path / "r.json"
    args = ["bench", "lenet5", "--runs", "5", "--partitioning", "cost", "--profile"]
    out = _cli(run_python, *args, "--runtime", "tflite_runtime", "--json", str(path))
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(path.read_text())
    if report["device_type"] != "cpu":
        pytest.skip("a GPU may claim lenet5 by cost")
    _assert_nothing_delegated(out.stdout, report)
    assert report["runtime"] == "tflite_runtime"
    assert "profile: nothing was delegated, so there are no kernels to time" in out.stdout
    assert "top ops:" not in out.stdout and "profile" not in report
    # Both rows run TFLite's CPU kernels: in blocks, or their thread pools slow each other.
    assert report["timing"] == "blocks" and "two interpreters' CPU thread pools" in out.stdout


def _result(name: str, times: list[float]) -> dict:
    return {
        "name": name,
        "runs": len(times),
        "median_ms": float(np.median(times)),
        "p90_ms": float(np.percentile(times, 90)),
        "min_ms": min(times),
    }


def test_spread_warnings() -> None:
    steady = _result("cpu", [1.0, 1.02, 0.98, 1.01, 1.0, 0.99])
    assert timing_warnings([steady, _result("delegate", [0.5, 0.51, 0.5, 0.52, 0.5])]) == []
    # The case: one CPU sample of 22.6 ms among 0.059 ms ones made a "17.22x".
    few, spread = timing_warnings([_result("cpu", [0.059, 22.6]), _result("delegate", [1.3] * 2)])
    assert few.startswith("only 2 timed run(s) per row")
    assert spread.startswith("cpu run times spread widely")
    noisy = _result("cpu", [0.059, 0.06, 0.061, 22.6, 0.06, 0.06, 0.059, 0.06, 0.06, 22.0])
    (w,) = timing_warnings([noisy, _result("delegate", [1.3] * 10)])
    assert w.startswith("cpu run times spread widely (min 0.059,") and "unreliable" in w


def test_inspect_uses_load_defaults_and_names_the_device(run_python, tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(_small_model())
    out = _cli(run_python, "inspect", str(model), env={"CLGPU_PARTITIONING": None})
    assert out.returncode == 0, out.stderr[-2000:]
    device_cpu = "(an OpenCL cpu device)" in out.stdout
    if device_cpu:  # the cost model's default declines everything there, as load() does
        assert "delegated 0 of 4 nodes: the cost model declines 4" in out.stdout, out.stdout
    out = _cli(run_python, "inspect", str(model), "--partitioning", "all")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "delegated 4 of 4 nodes in 1 partition(s)" in out.stdout, out.stdout
    rows = re.findall(r"^\s+\d+\s+(\S+)\s+(\S+)", out.stdout, re.M)
    assert [op for op, _ in rows] == ["CONV_2D", "DEPTHWISE_CONV_2D", "MUL", "FULLY_CONNECTED"]
    assert {where for _, where in rows} == {"OpenCL" if device_cpu else "GPU"}
    assert (" GPU " not in out.stdout) if device_cpu else True


def test_inspect_estimates_against_the_threads_bench_uses(run_python, tmp_path: Path) -> None:
    """The cost model weighs the device against XNNPACK on the interpreter's threads: inspect
    gives its interpreter every core by default, as bench does, so both see the same
    decisions; --threads names another count."""
    model = tmp_path / "m.tflite"
    model.write_bytes(_small_model())
    cores = os.cpu_count() or 1

    def threads_of(*extra: str) -> set[int]:
        out = _cli(run_python, "inspect", str(model), "--partitioning", "cost", *extra)
        assert out.returncode == 0, out.stderr[-2000:]
        return {int(t) for t in re.findall(r"nodes, (\d+) threads;", out.stdout)}

    assert threads_of() == {cores}
    assert threads_of("--threads", "1") == {1}


def test_models_model_version_and_help(run_python, tmp_path: Path) -> None:
    out = _cli(run_python, "models")
    assert out.returncode == 0, out.stderr
    listed = [line.split()[0] for line in out.stdout.splitlines()[1:-1]]
    assert listed == list(zoo.MODELS)
    path = tmp_path / "l.tflite"
    out = _cli(run_python, "model", "lenet5", "-o", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"wrote {path}: lenet5, input 32x32")
    assert path.read_bytes() == zoo.build("lenet5")
    assert path.stat().st_mode & 0o044 == 0o044  # readable by others, unlike the 0600 cache
    out = _cli(run_python, "--version")
    assert (
        out.returncode == 0
        and out.stdout.strip() == f"python -m clgpu_delegate {clgpu_delegate.__version__}"
    )
    out = _cli(run_python, "bench", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert ", ".join(zoo.MODELS) in text
    for default in (
        "(default: 20)",
        "(default: fp32)",
        "(default: auto)",
        "(default: mobilenet_v2)",
    ):
        assert default in text, text
