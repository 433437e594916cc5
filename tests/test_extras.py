"""Packaging: `import clgpu_delegate` and `load()` need no optional extra (the model builder's
tflite / flatbuffers, the benchmark's tqdm); without them the model builder and the benchmark
name the extra to install. And the `_core.pyi` stub names what the extension defines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clgpu_delegate.modelgen import ModelBuilder

# In a fresh interpreter: the optional modules cannot be imported (None in sys.modules makes
# `import name` raise ImportError, as if the package were not installed).
BLOCKED = ("tflite", "flatbuffers", "tqdm", "matplotlib")
_CODE = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None

import clgpu_delegate
from clgpu_delegate.__main__ import main
from clgpu_delegate.bench import run_benchmark
from clgpu_delegate.report import format_report, inspect_model
from clgpu_delegate.runtime import make_interpreter

out = {{"devices": len(clgpu_delegate.devices(probe_fp16=False))}}
d = clgpu_delegate.load(partitioning="all")
it = make_interpreter({model!r}, [d], reference=True)
it.allocate_tensors()
it.invoke()
out["delegated"] = d.delegated_nodes()
out["decisions"] = [x.to_dict() for x in d.decisions()]
out["invokes"] = d.stats().invokes
out["allocated_total_bytes"] = d.memory().allocated_total_bytes
out["inspect"] = format_report(inspect_model({model!r}))
for name, call in (
    ("modelgen", lambda: __import__("clgpu_delegate.modelgen.zoo")),
    ("bench_api", lambda: run_benchmark({model!r}, runs=1)),
):
    try:
        call()
        out[name] = "no error"
    except ImportError as e:
        out[name] = f"{{type(e).__name__}}: {{e}}"
out["bench_cli"] = main(["bench", {model!r}, "--runs", "1"])
out["loaded"] = sorted(n for n in {blocked!r} if sys.modules.get(n) is not None)
print(json.dumps(out))
"""


def test_load_works_without_the_optional_extras(run_python, tmp_path: Path) -> None:
    b = ModelBuilder(seed=1)
    x = b.input("x", (1, 6, 6, 4))
    b.output(b.conv2d(x, b.rand((3, 3, 3, 4)), bias=b.rand((3,)), activation="RELU"))
    model = tmp_path / "conv.tflite"
    model.write_bytes(b.build())

    p = run_python(_CODE.format(blocked=BLOCKED, model=str(model)))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["devices"] >= 1
    assert out["delegated"] == [0] and out["invokes"] == 1, out
    assert out["decisions"][0]["op_name"] == "CONV_2D" and out["decisions"][0]["delegated"]
    assert out["allocated_total_bytes"] > 0
    assert "delegated 1 of 1 nodes" in out["inspect"], out["inspect"]
    assert out["modelgen"] == (
        "MissingExtraError: the model builder (clgpu_delegate.modelgen) needs 'tflite', "
        "from the [models] extra: pip install 'clgpu-delegate[models]'"
    )
    assert out["bench_api"].startswith("MissingExtraError: the benchmark needs 'tqdm'"), out
    assert "pip install 'clgpu-delegate[bench]'" in out["bench_api"]
    # The command line prints the same one line and exits with 2.
    assert out["bench_cli"] == 2
    assert "error: the benchmark needs 'tqdm', from the [bench] extra" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("error:") == 1, p.stderr
    assert out["loaded"] == []


def test_core_stub_matches_the_extension(tmp_path: Path) -> None:
    # stubtest imports _core and compares every name, class and property with _core.pyi.
    # pybind11's own metaclass is the one difference a stub cannot state; the records (the
    # classes with to_dict) have no constructor, and pybind11's stand-in takes any arguments
    # to refuse them.
    pytest.importorskip("mypy")
    from clgpu_delegate import _core

    records = [n for n, v in vars(_core).items() if isinstance(v, type) and hasattr(v, "to_dict")]
    allow = tmp_path / "allowlist.txt"
    allow.write_text("".join(f"clgpu_delegate._core.{n}.__init__\n" for n in records))
    p = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "clgpu_delegate._core", "--allowlist", str(allow)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    )
    errors = [line for line in p.stdout.splitlines() if line.startswith("error:")]
    assert all("metaclass differs" in line for line in errors), p.stdout[-3000:]
    assert "1 module" in p.stdout, p.stdout + p.stderr


def test_core_stub_is_generated_from_the_bindings() -> None:
    # _core.pyi is pybind11-stubgen's output for the built extension (tests/core_stub.py): a
    # binding changed without regenerating the stub fails here.
    pytest.importorskip("pybind11_stubgen")
    p = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "core_stub.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
