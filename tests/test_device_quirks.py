"""Drivers that answer a device query oddly, played by the OpenCL shim (tests/faults/opencl_shim.c)
in a child process: the delegate must plan as it would with a plain answer.

Intel's CPU runtime reports a highest clock of 0 MHz. Read as 1 MHz it made the device's nominal
rate a thousandth of a slow CPU's, so no fold budget ever let an expand into a block kernel."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_fusion_expand import block

CHILD = """
import json, sys
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

runtime = sys.argv[1]
model = open("model.tflite", "rb").read()
x = np.random.default_rng(3).standard_normal((1, 8, 8, 8)).astype(np.float32)
outs = []
for delegates in ([], [clgpu_delegate.load(profiling=True)]):
    it = make_interpreter(model, delegates, runtime=runtime, reference=not delegates)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
algorithms = sorted({k.algorithm for k in delegates[0].profile().kernels})
print(json.dumps({"clock": delegates[0].device.max_clock_mhz, "algorithms": algorithms,
                  "err": float(np.abs(outs[0] - outs[1]).max())}))
"""


@pytest.mark.parametrize("clock", ["0", "1500"])
def test_a_device_without_a_clock_folds_as_one_with(
    clock: str, runtime: str, opencl_shim: Path, run_python: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "model.tflite").write_bytes(block((1, 8, 8, 8), seed=63))
    env = {"CLGPU_OPENCL_LIBRARY": str(opencl_shim), "CLGPU_SHIM_CLOCK_MHZ": clock}
    p = run_python([*["-c", CHILD], runtime], env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["clock"] == int(clock), r
    # The block's expand and depthwise inside its project's kernel, with the CPU's values.
    assert any("+EXPAND" in a for a in r["algorithms"]), r
    assert r["err"] < 1e-4, r
    if clock == "0":
        # The devices table shows no clock rather than 0 MHz.
        p = run_python(["-m", "clgpu_delegate", "devices", "--no-probe"], env=env)
        assert p.returncode == 0, p.stderr
        head, _, row = p.stdout.splitlines()[:3]
        at = head.index(" MHz ") + 1
        assert row[at : at + 4].strip() == "-", p.stdout
