"""Programs built on several threads at kernel init (runtime/build_threads.h): the same programs,
binaries and outputs as on one thread (CLGPU_BUILD_THREADS=1), one build per distinct source and
defines however many ops share it, and a build that fails on one thread reported with its log as
a serial build reports it. Each start is a fresh process: the program cache lives as long as the
device environment, which a process keeps."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from parity import compare, random_inputs, run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# One interpreter in a fresh process: its outputs (.npy), counters and the build lines of the log.
CHILD = r"""
import json, sys
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter
runtime, model, ser = sys.argv[1], sys.argv[2], sys.argv[3]
d = clgpu_delegate.load(partitioning="all", serialization_dir=ser)
it = make_interpreter(model, [d], runtime=runtime)
try:
    it.allocate_tensors()
except RuntimeError as e:
    print("RESULT " + json.dumps({"error": str(e)}))
    sys.exit(0)
for i, det in enumerate(it.get_input_details()):
    it.set_tensor(det["index"], np.load(f"input{i}.npy"))
it.invoke()
for i, det in enumerate(it.get_output_details()):
    np.save(f"output{i}.npy", it.get_tensor(det["index"]))
s = d.stats()
print("RESULT " + json.dumps({"built": s.programs_built, "delegated": len(d.delegated_nodes()),
                              "nodes": len(d.decisions()), "loads": s.program_binary_loads,
                              "cubins": s.program_cubins_stored,
                              "nvidia": "NVIDIA" in d.device.vendor}))
"""


def many_programs_model() -> bytes:
    """One partition whose ops need a dozen distinct programs (Winograd transforms and GEMM,
    implicit GEMM, depthwise, tiled and small-M GEMMs, pools, concat, mean, softmax), two of
    them twice (identical convs): the threads share one build of each."""
    b = ModelBuilder(seed=27)
    x = b.input("x", (2, 14, 14, 8))
    w3 = b.rand((16, 3, 3, 8))
    y = b.conv2d(x, w3, b.rand((16,)), activation="RELU")  # 3x3 stride 1: Winograd
    y2 = b.conv2d(x, w3, b.rand((16,)), activation="RELU")  # the same programs again
    s = b.conv2d(b.add(y, y2), b.rand((16, 3, 3, 16)), b.rand((16,)), stride=2)  # implicit GEMM
    d = b.depthwise_conv2d(s, b.rand((1, 3, 3, 16)), b.rand((16,)), activation="RELU6")
    p = b.conv2d(d, b.rand((24, 1, 1, 16)), b.rand((24,)))  # 1x1: GEMM
    q = b.add(p, b.conv2d(d, b.rand((24, 1, 1, 16)), b.rand((24,))), "RELU")
    pooled = b.concat([b.max_pool2d(q, 2, 2), b.avg_pool2d(q, 2, 2)], axis=3)
    rows = b.reshape(pooled, (-1, 48))  # M = 18 rows: the tiled GEMM of small problems
    h = b.fully_connected(rows, b.rand((32, 48)), b.rand((32,)), activation="RELU")
    b.output(h)
    head = b.fully_connected(b.mean(pooled, [1, 2]), b.rand((10, 48)), b.rand((10,)))  # M = 2
    b.output(b.softmax(head))
    return b.build()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "many_programs.tflite"
    path.write_bytes(many_programs_model())
    return path


def start(
    run_python: Callable[..., Any],
    cwd: Path,
    runtime: str,
    model: Path,
    ser: Path,
    threads: int,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[np.ndarray], list[str]]:
    """One fresh process (run_python's, in `cwd`): its result, outputs and the programs it built
    (the debug log's lines)."""
    for old in cwd.glob("output*.npy"):
        old.unlink()
    ref = make_interpreter(str(model), None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    for i, x in enumerate(random_inputs(ref.get_input_details(), 5)):
        np.save(cwd / f"input{i}.npy", x)
    full_env = {"CLGPU_BUILD_THREADS": str(threads), "CLGPU_LOG": "debug", **(env or {})}
    p = run_python(["-c", CHILD, runtime, str(model), str(ser)], env=full_env, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    result = json.loads(lines[0][7:])
    outs = sorted(cwd.glob("output*.npy"))
    built = [ln.split("] built in")[0] for ln in p.stderr.splitlines() if "] built in" in ln]
    return result, [np.load(o) for o in outs], built


def test_parallel_builds_match_serial(
    run_python: Callable[..., Any], runtime: str, model_file: Path, tmp_path: Path
) -> None:
    serial_dir, parallel_dir = tmp_path / "serial", tmp_path / "parallel"
    # PoCL's own cache off: the threads really compile, concurrently.
    cold = {"POCL_KERNEL_CACHE": "0"}
    serial, serial_out, serial_built = start(
        run_python, tmp_path, runtime, model_file, serial_dir, 1, cold
    )
    par, par_out, par_built = start(
        run_python, tmp_path, runtime, model_file, parallel_dir, 4, cold
    )
    assert "error" not in serial and "error" not in par, (serial, par)
    assert serial["delegated"] == serial["nodes"] == par["delegated"], (serial, par)
    # The same programs: one build each (the identical convs share theirs), on either path.
    assert par["built"] == serial["built"] >= 10, (serial, par)
    assert len(set(par_built)) == len(par_built), f"a program was built twice: {par_built}"
    assert sorted(par_built) == sorted(serial_built)
    # The same binaries, stored under the same keys (which cover source, options and device;
    # PoCL's bytes differ from one build to the next, on one thread too), and the parallel ones
    # load: a third start builds nothing.
    files = sorted(p.name for p in serial_dir.rglob("*.bin"))
    assert files and files == sorted(p.name for p in parallel_dir.rglob("*.bin"))
    warm, warm_out, _ = start(run_python, tmp_path, runtime, model_file, parallel_dir, 4)
    assert warm["built"] == 0 and "error" not in warm, warm
    for a, b in zip(serial_out, warm_out, strict=True):
        assert np.array_equal(a, b)
    # The same outputs, bit for bit, and both right.
    assert len(par_out) == len(serial_out) == 2
    for a, b in zip(serial_out, par_out, strict=True):
        assert np.array_equal(a, b)
    ref = make_interpreter(str(model_file), None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    compare(serial_out, run(ref, random_inputs(ref.get_input_details(), 5)), 1e-4, None)


def test_a_failed_build_on_one_thread_reports_its_log(
    run_python: Callable[..., Any], runtime: str, model_file: Path, tmp_path: Path
) -> None:
    # Tiles that break the GEMM kernels' own constraint (#error), for the small-problem GEMM
    # only: one program of the partition fails to build while the others build around it.
    bad = {"CLGPU_TUNE_GEMM_SMALL": "32,32,16,5,4"}
    results = {}
    for threads in (1, 4):
        r, _, built = start(
            run_python, tmp_path, runtime, model_file, tmp_path / f"t{threads}", threads, bad
        )
        assert "error" in r, r
        results[threads] = r["error"]
        if threads > 1:
            assert len(built) >= 3, built  # the other threads built theirs
    for err in results.values():
        assert "failed to build with options" in err, err
        assert "-DWPT_M=5" in err and "must be multiples of WPT_M" in err, err  # options and log
    # The same report either way, less what names the source: PoCL's temporary file, and the
    # number Intel's CPU runtime gives each program of a process ("6:127:2: error").
    same = {
        re.sub(r"(?m)^\d+:(\d+:\d+:)", r"\1", re.sub(r"tempfile_\w+", "tempfile", e))
        for e in results.values()
    }
    assert len(same) == 1, results
    # Nothing of the failure is remembered: the same model then builds and runs.
    ok, out, _ = start(run_python, tmp_path, runtime, model_file, tmp_path / "t1", 4)
    assert "error" not in ok and ok["delegated"] == ok["nodes"] and len(out) == 2, ok


def test_build_threads_must_be_a_count(run_python: Callable[..., Any], model_file: Path) -> None:
    code = (
        "import clgpu_delegate\nfrom clgpu_delegate.runtime import make_interpreter\n"
        f"it = make_interpreter({str(model_file)!r}, [clgpu_delegate.load(partitioning='all')])\n"
        "try:\n    it.allocate_tensors()\nexcept RuntimeError as e:\n    print('ERR', e)\n"
    )
    p = run_python(code, env={"CLGPU_BUILD_THREADS": "many"})
    assert "CLGPU_BUILD_THREADS must be a count" in p.stdout, p.stdout + p.stderr


def test_stored_binaries_are_machine_code_on_nvidia(
    run_python: Callable[..., Any], runtime: str, model_file: Path, tmp_path: Path
) -> None:
    """NVIDIA's OpenCL binary is PTX, which the driver compiles again at each load: with
    CLGPU_NV_CUBIN=1 the stored one is the cubin libcuda links from it (cl/nv_cubin.h), by
    default the PTX. Both load without a build and compute what the source build computed.
    Elsewhere nothing is linked."""
    cold = {"CUDA_CACHE_DISABLE": "1", "CLGPU_NV_CUBIN": "1"}  # NVIDIA's own cache off
    first, first_out, _ = start(run_python, tmp_path, runtime, model_file, tmp_path / "a", 4, cold)
    assert "error" not in first and first["built"] >= 10, first
    if not first["nvidia"]:
        assert first["cubins"] == 0, first
        return
    assert first["cubins"] == first["built"], first
    payloads = [p.read_bytes() for p in (tmp_path / "a").rglob("*.bin")]
    assert len(payloads) == first["built"] and all(b"\x7fELF" in p for p in payloads)
    warm, warm_out, _ = start(run_python, tmp_path, runtime, model_file, tmp_path / "a", 4, cold)
    assert warm["built"] == 0 and warm["loads"] == first["built"], warm
    ptx_env = {"CUDA_CACHE_DISABLE": "1"}
    ptx, _, _ = start(run_python, tmp_path, runtime, model_file, tmp_path / "b", 4, ptx_env)
    assert ptx["cubins"] == 0 and ptx["built"] == first["built"], ptx
    assert not any(b"\x7fELF" in p.read_bytes() for p in (tmp_path / "b").rglob("*.bin"))
    ptx_warm, ptx_out, _ = start(run_python, tmp_path, runtime, model_file, tmp_path / "b", 4, cold)
    assert ptx_warm["built"] == 0, ptx_warm
    for a, b, c in zip(first_out, warm_out, ptx_out, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c)
