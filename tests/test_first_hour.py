"""What a newcomer trips on first (issue "The first hour, round 2"): `measure` accepted wherever
`partitioning` is, the small things of point 9, getting the wheel and the public models, and
every error one line (bench's points: test_first_hour_bench.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

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


# ---- point 9: the small things --------------------------------------------------------------


def test_profile_table_when_nothing_ran_on_the_device(runtime: str) -> None:
    from clgpu_delegate.modelgen import ModelBuilder
    from clgpu_delegate.runtime import make_interpreter

    b = ModelBuilder(seed=1)
    b.output(b.relu(b.input("x", (1, 4))))
    d = clgpu_delegate.load(profiling=True, partitioning="none")
    it = make_interpreter(b.build(), [d], runtime=runtime)
    it.allocate_tensors()
    it.invoke()
    table = d.profile().table()
    assert "\n" not in table and "no kernel was timed" in table, table


def test_profile_columns_fit_long_names() -> None:
    from clgpu_delegate.profile import Profile

    kernel = {"partition": 0, "op": "CONV_2D", "kernel": "k", "shape": "1x8x8x4", "count": 2}
    kernel |= {"total_ns": 2e6, "raw_ns": 2e6, "flops": 1e6, "bytes": 1e6}
    long_name = "implicit_gemm+DEPTHWISE+ADD+RELU6"
    # The native ProfileSnapshot's fields, as attributes.
    raw = SimpleNamespace(
        enabled=True,
        event_overhead_ns=0,
        kernels=[SimpleNamespace(**kernel, node=0, algorithm="direct")]
        + [SimpleNamespace(**kernel, node=1, algorithm=long_name)],
        partitions=[],
        trace=[],
    )
    head, *rows = Profile(raw).table().splitlines()[:3]  # type: ignore[arg-type]
    at = head.index("calls")
    for row in rows:  # the calls column starts where its header does, on every row
        assert row[at - 1] == " " and row[at : at + 6].strip() == "2", (head, row)
    assert long_name in rows[1]


def test_devices_explains_its_int8_column(run_python) -> None:
    p = run_python(["-m", "clgpu_delegate", "devices", "--no-probe"])
    assert p.returncode == 0, p.stderr[-2000:]
    legend = [ln for ln in p.stdout.splitlines() if ln.startswith("int8:")]
    assert len(legend) == 1 and "portable" in legend[0] and "dp4a" in legend[0], p.stdout


def test_invalid_flag_value_is_not_suggested(run_python) -> None:
    p = run_python(["-m", "clgpu_delegate", "bench", "-o", "precision=fp8"])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "--precision fp32|fp16|auto" in p.stderr and "--precision fp8" not in p.stderr
    p = run_python(["-m", "clgpu_delegate", "bench", "-o", "precision=fp16"])
    assert p.returncode == 2 and "use --precision fp16 instead" in p.stderr, p.stderr


def test_serialization_dir_makes_one_level(tmp_path) -> None:
    deep = tmp_path / "no" / "such" / "cache"
    with pytest.raises(ValueError, match="create it first") as e:
        clgpu_delegate.load(serialization_dir=str(deep), partitioning="all")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "no").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="not a directory"):
        clgpu_delegate.load(serialization_dir=str(tmp_path / "file"))
    clgpu_delegate.load(serialization_dir=str(tmp_path / "cache"), partitioning="all")


def test_plugin_refuses_a_missing_parent(runtime: str, tmp_path) -> None:
    import importlib

    load_delegate = importlib.import_module(f"{runtime}.interpreter").load_delegate
    try:
        path = clgpu_delegate.plugin_path()
    except FileNotFoundError:
        pytest.skip("the package was built without the plugin")
    with pytest.raises(ValueError):
        load_delegate(path, {"serialization_dir": str(tmp_path / "a" / "b")})
    assert not (tmp_path / "a").exists()


# ---- points 2 and 7: getting the package and the public models ------------------------------


def test_readme_names_the_wheel_by_glob() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "dist/clgpu_delegate-*.whl" in readme
    assert not re.search(r"manylinux_\d+_\d+[^`]*\.whl", readme)  # a tag follows the machine
    assert "pip install ." in readme and "no package index" in readme


def test_public_model_skips_say_how_to_fetch(tmp_path) -> None:
    """Offline (here: fetching turned off) the corpus's tests are skipped, and the session's
    summary says how many and which command fetches them."""
    env = {**os.environ, "CLGPU_FETCH_MODELS": "0", "CLGPU_PUBLIC_MODELS": str(tmp_path)}
    tests = Path(__file__).resolve().parent
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "audio_example1",
         str(tests / "test_int8_public_models.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert p.returncode == 0, p.stdout[-2000:]
    runtimes = sum(_importable(r) for r in ("tflite_runtime", "ai_edge_litert"))
    note = f"public models: {runtimes} tests skipped"
    assert note in p.stdout and "python tests/public_models.py" in p.stdout, p.stdout[-2000:]


def test_public_models_script_checks_its_arguments() -> None:
    script = Path(__file__).resolve().parent / "public_models.py"
    p = subprocess.run([sys.executable, str(script), "nosuchmodel"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "unknown model 'nosuchmodel'" in p.stderr


def test_a_corrupt_cached_model_is_not_used(tmp_path, monkeypatch) -> None:
    import public_models

    monkeypatch.setattr(public_models, "CACHE", tmp_path)
    (tmp_path / "audio_example1.tflite").write_bytes(b"TFL3 not the model")
    assert public_models.cached("audio_example1") is None


def _importable(runtime: str) -> bool:
    return importlib.util.find_spec(runtime) is not None  # as conftest's runtime fixture
