"""What a newcomer trips on first (issue "The first hour, round 2"): `measure` accepted wherever
`partitioning` is, and every error one line."""

from __future__ import annotations

import pytest

import clgpu_delegate


def test_inspect_takes_measure(run_python) -> None:
    p = run_python(["-m", "clgpu_delegate", "inspect", "lenet5", "--partitioning", "measure"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "delegated" in p.stdout and "Traceback" not in p.stderr


def test_load_names_every_partitioning() -> None:
    with pytest.raises(ValueError) as e:
        clgpu_delegate.load(partitioning="fastest")
    msg = str(e.value)
    assert "\n" not in msg
    for name in ("cost", "all", "none", "measure"):
        assert name in msg


def test_bench_says_when_the_first_result_came_from_the_cpu(run_python) -> None:
    """With the warm-up (the default), bench's first result is TFLite's CPU kernels' while the
    programs build; it says so, and its other rows (and the comparison) are the device's."""
    p = run_python(
        ["-m", "clgpu_delegate", "bench", "--model", "lenet5", "--partitioning", "all",
         "--runs", "3"],
        env={"CLGPU_CPU_WARMUP": "1", "CLGPU_SETUP_DELAY_MS": "1500"},
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "first: TFLite's CPU kernels ran it while the programs built" in p.stdout
    row = next(line for line in p.stdout.splitlines() if line.startswith("delegate"))
    assert float(row.split()[-2]) > 0, row  # max abs: the device's numbers, not the CPU's own


def test_inspect_says_why_weight_nodes_stay(runtime: str) -> None:
    """A FLOAT16 weight's DEQUANTIZE stays on the CPU because its reader does (here the cost
    model keeps the conv there): the summary says so, not that the delegate cannot run it."""
    from clgpu_delegate.modelgen import ModelBuilder
    from clgpu_delegate.report import inspect_model

    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 8, 8, 3))
    b.output(b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), fp16_weights=True))
    report = inspect_model(b.build(), runtime=runtime, partitioning="none")
    summary = report.summary()
    assert "weight or shape nodes stay with their CPU readers (DEQUANTIZE x" in summary, summary
    assert "does not run" not in summary, summary
