"""Bad input to the command line: each case is one line on stderr saying what is wrong and what
to do, exit code 2, no traceback, no signal, and no work done first (no output, no device)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clgpu_delegate.modelgen import ModelBuilder


def _model() -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")
    y = b.reshape(y, (1, -1))
    b.output(b.fully_connected(y, b.rand((5, 256))))
    return b.build()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    data = _model()
    contents = {
        "good": data,
        "truncated": data[:200],
        "cut": data[: len(data) * 4 // 5],
        "empty": b"",
        "random": os.urandom(5000),
    }
    out = {}
    for name, content in contents.items():
        out[name] = d / f"{name}.tflite"
        out[name].write_bytes(content)
    return out


def one_line_error(p: subprocess.CompletedProcess[str], *words: str) -> str:
    """The single stderr line of a refused command, checked."""
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])  # a signal would be negative
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert p.stdout == "", p.stdout  # refused before any work
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _cli(run_python, *args: str, env: dict[str, str | None] | None = None):
    return run_python(["-m", "clgpu_delegate", *args], env=env)


@pytest.mark.parametrize("command", ["inspect", "bench"])
@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("truncated", ["truncated.tflite", "not a valid TFLite model", "re-export"]),
        ("cut", ["cut.tflite", "lies outside the file", "re-export"]),
        ("empty", ["empty.tflite", "is empty (0 bytes)"]),
        ("random", ["random.tflite", "not a TFLite model", "TFL3"]),
    ],
)
def test_damaged_model_files(run_python, files, command: str, name: str, words) -> None:
    # tflite_runtime (the default runtime here) segfaults on the truncated file if it sees it.
    p = _cli(run_python, command, str(files[name]), "--runtime", "tflite_runtime")
    one_line_error(p, "error:", *words)


@pytest.mark.parametrize("command", ["inspect", "bench"])
def test_missing_file_and_directory(run_python, tmp_path: Path, command: str) -> None:
    missing = str(tmp_path / "nonexistent.tflite")
    one_line_error(_cli(run_python, command, missing), "model file not found", missing, "models")
    one_line_error(_cli(run_python, command, str(tmp_path)), "is not a file")
    one_line_error(_cli(run_python, command, "nonexistent"), "unknown model 'nonexistent'")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-o", "foo"], ["-o/--option", "expected KEY=VALUE", "'foo'"]),
        (["-o", "bogus=1"], ["unknown delegate option 'bogus'", "zero_copy"]),
        (["-o", "precision=fp16"], ["use --precision fp16"]),
        (["--runs", "0"], ["--runs", "must be at least 1, got 0"]),
        (["--runs", "-1"], ["--runs", "must be at least 1, got -1"]),
        (["--runs", "many"], ["--runs", "expected a positive integer"]),
        (["--threads", "0"], ["--threads", "must be at least 1"]),
        (["--size", "64"], ["--size applies to built-in models only"]),
        (["--precision", "fp64"], ["--precision", "invalid choice"]),
        (["--partitioning", "some"], ["--partitioning", "invalid choice"]),
        (["--model", "lenet5"], ["not both"]),
    ],
)
def test_bad_bench_arguments(run_python, files, args, words) -> None:
    one_line_error(_cli(run_python, "bench", str(files["good"]), *args), *words)


def test_output_paths_checked_before_any_work(run_python, files, tmp_path: Path) -> None:
    good = str(files["good"])
    for flag in ("--json", "--plot"):
        target = str(tmp_path / "no-such-dir" / "out.x")
        one_line_error(
            _cli(run_python, "bench", good, flag, target), flag, "does not exist", "create it"
        )
        one_line_error(_cli(run_python, "bench", good, flag, str(tmp_path)), "is a directory")
    assert not list(tmp_path.glob("no-such-dir*"))


def test_missing_packages_are_named_before_the_benchmark(run_python, files) -> None:
    # In a fresh interpreter the package counts as not installed (None in sys.modules).
    code = (
        "import sys\n"
        "sys.modules[{mod!r}] = None\n"
        "from clgpu_delegate.__main__ import main\n"
        "sys.exit(main({args!r}))\n"
    )
    good = str(files["good"])
    p = run_python(code.format(mod="matplotlib", args=["bench", good, "--plot", "p.png"]))
    one_line_error(p, "--plot needs 'matplotlib'", "pip install 'clgpu-delegate[plot]'")
    p = run_python(
        code.format(mod="ai_edge_litert", args=["bench", good, "--runtime", "ai_edge_litert"])
    )
    one_line_error(p, "ai_edge_litert is not installed", "pip install ai-edge-litert")


def test_model_command_errors(run_python, tmp_path: Path) -> None:
    out = str(tmp_path / "m.tflite")
    one_line_error(_cli(run_python, "model", "nope", "-o", out), "unknown model 'nope'")
    missing = str(tmp_path / "no-such-dir" / "m.tflite")
    one_line_error(_cli(run_python, "model", "lenet5", "-o", missing), "does not exist")
    one_line_error(_cli(run_python, "model", "lenet5", "-o", str(tmp_path)), "is a directory")
    one_line_error(_cli(run_python, "model", "lenet5"), "-o/--output", "required")
    one_line_error(_cli(run_python, "model", "lenet5", "-o", out, "--size", "0"), "--size")
    assert not Path(out).exists()


def test_usage_names_the_command_as_run(run_python) -> None:
    script = Path(sys.executable).with_name("clgpu-delegate")
    if not script.exists():
        pytest.skip("no clgpu-delegate console script beside this interpreter")
    p = subprocess.run([str(script), "bench", "--runs", "0"], capture_output=True, text=True)
    assert one_line_error(p).startswith("clgpu-delegate bench: error: argument --runs")
    p = _cli(run_python, "bench", "--runs", "0")
    assert one_line_error(p).startswith("python -m clgpu_delegate bench: error:")
