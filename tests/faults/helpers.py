"""Helpers of the test_faults*.py tests: the model they break, its stock-TFLite reference, the
programs they run in child processes, and the counting, fault-injecting OpenCL shim."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from parity import run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

HERE = Path(__file__).resolve().parent


def script(name: str) -> str:
    """The path of a child-process program in tests/faults/, for `python PATH args...`."""
    return str(HERE / name)


def two_partition_model() -> bytes:
    """conv -> conv | ADD+TANH | add -> transpose: two delegated partitions around a CPU op
    (node 2: a fused TANH keeps the ADD on the CPU, and saturates, so the byte-flip fuzz's
    huge mutated weights cannot turn rounding differences into different outputs)."""
    b = ModelBuilder(seed=81)
    x = b.input("x", (1, 9, 8, 3))
    y = b.conv2d(x, b.rand((6, 3, 3, 3)), b.rand((6,)), activation="RELU")
    y = b.conv2d(y, b.rand((4, 3, 3, 6)), stride=2)
    y = b.add(y, b.rand((4,)), "TANH")
    y = b.add(y, b.rand((4,)))
    b.output(b.transpose(y, (0, 3, 1, 2)))
    return b.build()


MODEL = two_partition_model()


def two_output_model() -> bytes:
    """One partition with two outputs (two read-backs per invoke) and three kernels."""
    b = ModelBuilder(seed=82)
    x = b.input("x", (1, 6, 5, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)))
    z = b.add(y, b.rand((4,)), "RELU")
    b.output(y)
    b.output(b.transpose(z, (0, 3, 1, 2)))
    return b.build()


def reference(runtime: str, inputs: list[np.ndarray], model: bytes = MODEL) -> list[np.ndarray]:
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    return run(ref, inputs)


# ---- the OpenCL shim -------------------------------------------------------------------------
#
# opencl_shim.c replaces libOpenCL for the delegate through CLGPU_OPENCL_LIBRARY: any entry
# point can fail on its n-th call, once or for good, and it counts the objects created and
# released (test_lifetime.py counts with it too). The order of its counters:
KINDS = ("contexts", "queues", "mems", "programs", "kernels", "events", "maps")


def build_opencl_shim(out: Path) -> Path:
    """Compiles the shim into `out`; skips the test when there is no C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the counting OpenCL shim")
    lib = out / "libclcount.so"
    # -l:libOpenCL.so.1: the runtime library, as no development symlink may be installed.
    p = subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-o",
            str(lib),
            str(HERE / "opencl_shim.c"),
            "-Wl,--no-as-needed",
            "-l:libOpenCL.so.1",
            "-ldl",
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode:
        pytest.skip(f"cannot build the counting OpenCL shim: {p.stderr[-500:]}")
    return lib


class ShimResults:
    """runtime -> {scenario: result} of faults/shim_scenarios.py: every scenario in one child
    per runtime (OpenCL is loaded once per process, and a child per test would cost seconds
    each), run once per session and shared by the test files that read them. A crash fails the
    scenario it happened in; the rest run in a new child."""

    def __init__(self, shim: Path, work: Path, package_root: str) -> None:
        self.shim, self.work, self.root = shim, work, package_root
        self.cache: dict[str, dict[str, dict[str, Any]]] = {}

    def __call__(self, runtime: str) -> dict[str, dict[str, Any]]:
        if runtime not in self.cache:
            self.cache[runtime] = self._run(runtime)
        return self.cache[runtime]

    def _run(self, runtime: str) -> dict[str, dict[str, Any]]:
        env = dict(
            os.environ,
            CLGPU_OPENCL_LIBRARY=str(self.shim),
            CLGPU_LOG="warning",  # the scenarios read the warnings
            CLGPU_CPU_WARMUP="0",  # the warm-up scenarios ask for it
            # Prepended: the runtimes may themselves come from PYTHONPATH. tests/: the models.
            PYTHONPATH=os.pathsep.join(
                p for p in (self.root, str(HERE.parent), os.environ.get("PYTHONPATH")) if p
            ),
        )
        env.pop("CLGPU_SHIM_FAIL", None)
        out: dict[str, dict[str, Any]] = {}
        todo: list[str] = []  # none: all
        while True:
            p = subprocess.run(
                [sys.executable, script("shim_scenarios.py"), runtime, *todo],
                cwd=self.work,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            plan, current = todo, None
            for line in p.stdout.splitlines():
                if line.startswith("PLAN "):
                    plan = line.split()[1:]
                elif line.startswith("BEGIN "):
                    current = line.split()[1]
                elif line.startswith("RESULT "):
                    _, name, payload = line.split(" ", 2)
                    out[name] = json.loads(payload)
                    current = None
            if p.returncode == 0:
                return out
            if current is None:
                raise AssertionError(f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}")
            out[current] = {"crashed": f"exit {p.returncode}", "stderr": p.stderr[-3000:]}
            todo = plan[plan.index(current) + 1 :]
            if not todo:
                return out
