"""Devices unlike PoCL's CPU, played by the OpenCL shim (tests/faults/opencl_shim.c) in a child
process: the delegate must plan for what the device reports and run what it plans.

- Intel's CPU runtime reports a highest clock of 0 MHz. Read as 1 MHz it made the device's
  nominal rate a 2,500th of a slow CPU's, so no fold budget ever let an expand into a block kernel.
- Mobile GPUs (Mali, Adreno) have 32 KiB of local memory, where PoCL has 1 MiB and NVIDIA 48 KiB.
  The small-M GEMM of every batch-1 FULLY_CONNECTED kept 32 KiB + 36 bytes of partial sums, and
  such a driver refuses the launch (Oclgrind's 32 KiB device did): the shim refuses it the same
  way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_fully_connected import FC, fc_model
from test_fusion_expand import block

CHILD = """
import json, sys
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

runtime = sys.argv[1]
model = open("model.tflite", "rb").read()
rng = np.random.default_rng(3)
outs, inputs = [], None
for delegates in ([], [clgpu_delegate.load(partitioning="all", profiling=True)]):
    it = make_interpreter(model, delegates, runtime=runtime, reference=not delegates)
    it.allocate_tensors()
    details = it.get_input_details()
    if inputs is None:
        inputs = [rng.standard_normal(d["shape"]).astype(np.float32) for d in details]
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
dev = delegates[0].device
print(json.dumps({
    "clock": dev.max_clock_mhz, "local": dev.local_mem_bytes,
    "algorithms": sorted({k.algorithm for k in delegates[0].profile().kernels}),
    "err": float(np.abs(outs[0] - outs[1]).max()),
    "scale": float(np.abs(outs[0]).max()),
}))
"""


def run_child(
    run_python: Callable[..., Any],
    tmp_path: Path,
    runtime: str,
    model: bytes,
    shim: Path,
    **env: str,
) -> dict[str, Any]:
    (tmp_path / "model.tflite").write_bytes(model)
    p = run_python(
        [*["-c", CHILD], runtime], env={"CLGPU_OPENCL_LIBRARY": str(shim), **env}, timeout=600
    )
    assert p.returncode == 0, p.stderr[-3000:]
    r: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["err"] <= 1e-4 * max(r["scale"], 1.0), r  # the CPU's values
    return r


@pytest.mark.parametrize("clock", ["0", "1500"])
def test_a_device_without_a_clock_folds_as_one_with(
    clock: str, runtime: str, opencl_shim: Path, run_python: Callable[..., Any], tmp_path: Path
) -> None:
    r = run_child(
        run_python,
        tmp_path,
        runtime,
        block((1, 8, 8, 8), seed=63),
        opencl_shim,
        CLGPU_SHIM_CLOCK_MHZ=clock,
    )
    assert r["clock"] == int(clock), r
    # The block's expand and depthwise inside its project's kernel.
    assert any("+EXPAND" in a for a in r["algorithms"]), r
    if clock == "0":
        # The devices table shows no clock rather than 0 MHz.
        env = {"CLGPU_OPENCL_LIBRARY": str(opencl_shim), "CLGPU_SHIM_CLOCK_MHZ": clock}
        p = run_python(["-m", "clgpu_delegate", "devices", "--no-probe"], env=env)
        assert p.returncode == 0, p.stderr
        head, _, row = p.stdout.splitlines()[:3]
        at = head.index(" MHz ") + 1
        assert row[at : at + 4].strip() == "-", p.stdout


@pytest.mark.parametrize(
    "case",
    [
        FC((1, 300), 40, 300, activation="RELU"),  # batch 1
        FC((8, 64), 24, 64),  # 8 rows, the kernel's most
    ],
    ids=["batch1", "rows8"],
)
def test_a_gpu_with_32_kib_of_local_memory_runs_small_dense_layers(
    case: FC, runtime: str, opencl_shim: Path, run_python: Callable[..., Any], tmp_path: Path
) -> None:
    r = run_child(
        run_python,
        tmp_path,
        runtime,
        fc_model(case, seed=5),
        opencl_shim,
        CLGPU_SHIM_LOCAL_MEM="32768",
    )
    assert r["local"] == 32768, r
    assert r["algorithms"] == ["gemv"], r


def test_a_mobile_sized_gpu_runs_a_whole_mobilenet(
    runtime: str, opencl_shim: Path, run_python: Callable[..., Any], tmp_path: Path
) -> None:
    """32 KiB of local memory and groups of at most 256 work-items (Mali's smaller parts): every
    kernel of MobileNetV2 (convolutions, depthwise, the inverted-residual blocks, the classifier,
    softmax) launches within both."""
    from clgpu_delegate.modelgen import zoo

    r = run_child(
        run_python,
        tmp_path,
        runtime,
        zoo.mobilenet_v2(size=64, seed=2),
        opencl_shim,
        CLGPU_SHIM_LOCAL_MEM="32768",
        CLGPU_SHIM_MAX_GROUP="256",
    )
    assert r["local"] == 32768 and len(r["algorithms"]) >= 5, r
