"""`bench` as a newcomer runs it (issue "The first hour, round 2", points 3, 4 and 8): a model
with dynamic input dimensions, `--partitioning measure`'s rows, Ctrl-C, absurd values. Each
error is one line on stderr with exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clgpu_delegate.modelgen import ModelBuilder

BENCH = ["-m", "clgpu_delegate", "bench"]


def _dynamic_model(path: Path) -> Path:
    """An input of signature [-1, -1] (declared [1, 1], as converters write it) that only a
    length of 8 runs: its RESHAPE to [2, 4] fails TFLite's prepare at the declared shape."""
    b = ModelBuilder(seed=2)
    x = b.input("samples", (1, 8), signature=(-1, -1))
    b.output(b.relu(b.reshape(x, (2, 4))))
    path.write_bytes(b.build())
    return path


def _one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_dynamic_input_at_its_declared_shape_is_one_line(run_python, tmp_path: Path) -> None:
    model = _dynamic_model(tmp_path / "dyn.tflite")
    line = _one_line_error(run_python([*BENCH, str(model), "--runs", "2"], timeout=300))
    assert "cannot run at its declared input shapes" in line, line
    # The failing node: the RESHAPE itself, or XNNPACK's node where it claimed the RESHAPE
    # (ai_edge_litert, the only runtime on Python 3.12+).
    assert "RESHAPE" in line or "XNNPack" in line, line
    assert "--input-shape samples:N,N" in line, line


def test_input_shape_makes_it_run(run_python, tmp_path: Path) -> None:
    model = _dynamic_model(tmp_path / "dyn.tflite")
    args = [*BENCH, str(model), "--runs", "3", "--partitioning", "all", "--json", "r.json"]
    p = run_python([*args, "--input-shape", "samples:1,8"], timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["input_shapes"] == {"samples": [1, 8]}
    cpu, dev = report["results"]
    assert cpu["runs"] == dev["runs"] == 3
    assert dev["delegated_nodes"] > 0, dev  # run at that shape on the device
    # The name may be left out for the only input; inspect takes the option too.
    p = run_python(["-m", "clgpu_delegate", "inspect", str(model), "--input-shape", "1,8"])
    assert p.returncode == 0 and "delegated" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize(
    "cmd,shape,message",
    [
        ("bench", "samples:1,3", "cannot run at the given input shapes"),
        ("inspect", "samples:1,3", "cannot run at the given input shapes"),
        ("bench", "other:1,8", "the model's inputs are samples"),
        ("inspect", "samples:1,8,1", "has rank 3"),
        ("bench", "samples:1,x", "expected NAME:D1,D2"),
        ("inspect", "samples:0,8", "expected NAME:D1,D2"),
        ("bench", "samples:1,99999999999", "at most"),
    ],
)
def test_bad_input_shape_is_one_line(
    run_python, tmp_path: Path, cmd: str, shape: str, message: str
) -> None:
    model = _dynamic_model(tmp_path / "dyn.tflite")
    line = _one_line_error(
        run_python(["-m", "clgpu_delegate", cmd, str(model), "--input-shape", shape], timeout=300)
    )
    assert message in line, line


def test_input_shape_of_a_built_in_model(run_python) -> None:
    line = _one_line_error(run_python([*BENCH, "--model", "lenet5", "--input-shape", "1,8"]))
    assert "--size" in line, line


def test_measure_rows_as_without_it(run_python, tmp_path: Path) -> None:
    """The plan's candidates are timed in a process of their own: the rows' RSS growth is what
    it is without measure (it read 0.06 MB after them, against 70), and the CPU row's median
    agrees with the plan's CPU median (4 ms against 0.03: two interpreters' thread pools
    alternating took the cores from each other)."""
    common = [*BENCH, "--model", "lenet5", "--runs", "30"]
    p = run_python([*common, "--partitioning", "measure", "--json", "m.json"], timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    p = run_python([*common, "--partitioning", "none", "--json", "n.json"], timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    measured = json.loads((tmp_path / "m.json").read_text())
    plain = json.loads((tmp_path / "n.json").read_text())
    for row, base in zip(measured["results"], plain["results"], strict=True):
        assert row["rss_mb"] > 0.5 * base["rss_mb"], (row, base)
    cpu_ms = measured["results"][0]["median_ms"]
    planned = measured["plan"]["ms"]["cpu"]
    assert cpu_ms < 10 * planned + 0.05, (cpu_ms, measured["plan"])


def test_ctrl_c_prints_what_was_measured() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [sys.executable, *BENCH, "--model", "lenet5", "--runs", "1000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
    )
    seen = b""
    assert p.stderr is not None
    # The progress bar counting timed runs: some were made (tqdm redraws every 0.1 s). Rows
    # timed in blocks (a CPU device) count their runs each, rows timed in turns (a GPU) once.
    while not re.search(rb"\| [1-9][0-9]*/[12]000000", seen):
        chunk = os.read(p.stderr.fileno(), 4096)
        assert chunk, seen.decode()[-2000:]
        seen += chunk
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    text = (seen + err).decode()
    assert p.returncode == 130, text[-2000:]
    assert "Traceback" not in text, text[-3000:]
    cpu = next(ln for ln in out.decode().splitlines() if ln.startswith("cpu "))
    assert float(cpu.split()[3]) > 0, cpu  # the CPU row's median: measured, not lost
    assert " nan " not in out.decode(), out.decode()  # a row not reached shows "-"
    last = text.strip().splitlines()[-1]
    assert last.startswith("interrupted: ") and "of 1000000 timed" in last, last


@pytest.mark.parametrize(
    "args,message",
    [
        (["bench", "--runs", "99999999999999999999"], "at most 1,000,000 timed runs"),
        (["model", "pynet", "--size", "20000", "-o", "p.tflite"], "--size 20000: at most"),
        (["bench", "--model", "pynet", "--size", "20000"], "--size 20000: at most"),
    ],
)
def test_absurd_values_are_refused(run_python, args: list[str], message: str) -> None:
    line = _one_line_error(run_python(["-m", "clgpu_delegate", *args]))
    assert message in line, line


def test_threads_above_the_cores_are_lowered(run_python) -> None:
    cores = os.cpu_count() or 1
    p = run_python([*BENCH, "--model", "lenet5", "--runs", "2", "--threads", str(cores + 1000)])
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"this machine has {cores} cores; using {cores}" in p.stderr
    assert f"CPU threads {cores} " in p.stdout


def test_token_id_inputs_get_valid_ids(run_python, tmp_path: Path) -> None:
    # A model whose int32 input holds token ids (EMBEDDING_LOOKUP, as BERT-style encoders from
    # litert-torch take them): the benchmark fed N(0, 1) cast to int, so ids of -1 failed the
    # CPU's invoke before anything was timed. Seeded ids now lie in the table.
    b = ModelBuilder(seed=4)
    ids = b.input("ids", (64,), dtype="int32")
    x = b.embedding_lookup(ids, b.rand((5, 8), scale=1.0))
    b.output(b.fully_connected(x, b.rand((4, 8)), activation="RELU"))
    model = tmp_path / "tokens.tflite"
    model.write_bytes(b.build())
    args = [*BENCH, str(model), "--runs", "2", "--partitioning", "all", "--json", "r.json"]
    p = run_python(args, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    cpu, dev = json.loads((tmp_path / "r.json").read_text())["results"]
    assert dev["delegated_nodes"] == 2 and dev["runs"] == 2, dev
    assert dev["max_rel_diff"] < 1e-5, dev
