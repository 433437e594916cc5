"""Real OpenCL errors, injected below the delegate by a shim library (faults/opencl_shim.c):
each entry point fails once or for good, so the delegate's own error paths run, and no OpenCL
object may outlive the scenario."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faults.helpers import script

# The shim replaces libOpenCL for the delegate through CLGPU_OPENCL_LIBRARY: any entry point can
# fail on its n-th call, once or for good: a read failing after other reads were enqueued, a
# failing clFinish, a transient fault followed by a good invoke on the same interpreter. The
# scenarios run in faults/shim_scenarios.py, all in one child per runtime (the shim_results
# fixture, shared with test_faults.py and test_cpu_warmup*.py).

SHIM_SCENARIOS = {
    # name: (the failing call, the OpenCL error name in the message, where it strikes)
    "platforms": ("clGetPlatformIDs", "CL_OUT_OF_HOST_MEMORY", "load"),
    "context": ("clCreateContext", "CL_OUT_OF_RESOURCES", "load"),
    "queue": ("clCreateCommandQueue", "CL_OUT_OF_RESOURCES", "load"),
    "build": ("clBuildProgram", "CL_BUILD_PROGRAM_FAILURE", "cpu"),
    "buffer": ("clCreateBuffer", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "allocate"),
    "sub_buffer": ("clCreateSubBuffer", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "allocate"),
    "kernel": ("clCreateKernel", "CL_OUT_OF_RESOURCES", "allocate"),
    "write": ("clEnqueueWriteBuffer", "CL_OUT_OF_RESOURCES", "invoke"),
    "kernel_enqueue": ("clEnqueueNDRangeKernel", "CL_OUT_OF_RESOURCES", "invoke"),
    "flush": ("clFlush", "CL_OUT_OF_RESOURCES", "invoke"),
    "second_read": ("clEnqueueReadBuffer", "CL_OUT_OF_RESOURCES", "invoke"),
    "second_read_then_delete": ("clEnqueueReadBuffer", "CL_OUT_OF_RESOURCES", "invoke"),
    "second_output_map": ("clEnqueueMapBuffer", "CL_OUT_OF_RESOURCES", "invoke"),
    "unmap": ("clEnqueueUnmapMemObject", "CL_OUT_OF_RESOURCES", "invoke"),
    "finish": ("clFinish", "CL_OUT_OF_RESOURCES", "invoke"),
    "box_copy": ("clEnqueueCopyBuffer", "CL_OUT_OF_RESOURCES", "invoke"),
    "box_copy_rect": ("clEnqueueCopyBufferRect", "CL_OUT_OF_RESOURCES", "invoke"),
}


# Delegate bugs the shim exposes (reported); strict, so a fix shows up as XPASS.
KNOWN_SHIM_BUGS: dict[str, str] = {
    # Found by these scenarios and fixed since: any clGetPlatformIDs error reported as "no
    # platform"; a failed map or unmap of one output leaving the other outputs mapped.
}


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_SHIM_BUGS[name], strict=True))
        if name in KNOWN_SHIM_BUGS
        else name
        for name in SHIM_SCENARIOS
    ],
)
def test_real_opencl_error(
    scenario: str, runtime: str, shim_results: Callable[[str], dict[str, dict[str, Any]]]
) -> None:
    call, error, where = SHIM_SCENARIOS[scenario]
    r = shim_results(runtime)[scenario]
    assert "crashed" not in r, f"the process died: {r}"
    if scenario == "sub_buffer" and r["first"] == "ok" and "sub-buffers" not in r["arenas"]:
        # NVIDIA's arena is SVM views (runtime/partition.cc): no clCreateSubBuffer to fail.
        pytest.skip(f"this device's arena makes no sub-buffers ({r['arenas']})")
    if where == "cpu":
        # A program that does not build: the model runs on the CPU, correctly.
        assert r["delegated"] == [] and r["first"] == "ok", r
    else:
        assert r["first"].startswith("raised"), r
        assert call in r["first"] and error in r["first"], r["first"]
        if where == "load":
            assert r["first"].startswith(("raised NoDeviceError", "raised OpenCLError")), r
        else:
            assert r["first"].startswith("raised RuntimeError"), r
    if where == "invoke":
        assert r["warm"] == "ok", r
        # The same interpreter recovers once the driver does: no state left half-done.
        assert r["then"] == "ok" and r["again"] == "ok", r
    else:
        assert r["then"] == "ok", r
    if scenario == "build":
        assert r["then_delegated"], "a failed build must not be remembered as failed"
    leaked = dict(r["leaked"])
    if scenario == "unmap":
        # The mapping whose unmap the driver refused stays; nothing else may.
        assert leaked.pop("maps", 0) <= 1, r["leaked"]
    assert not leaked, f"OpenCL objects left after the scenario: {r['leaked']}"


# Found here and fixed: Invoke threw on a failed enqueue without waiting for the commands
# already enqueued, so an earlier output's non-blocking read still wrote into TFLite's tensor
# after invoke() had raised (heap-use-after-free under ASan once the interpreter was deleted).
def test_no_device_writes_after_a_failed_invoke(
    runtime: str, run_python: Callable, opencl_shim: Path
) -> None:
    p = run_python(
        [script("late_write.py"), runtime, "20"],
        env={"CLGPU_OPENCL_LIBRARY": str(opencl_shim), "CLGPU_LOG": "error"},
    )
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    assert "LATE 0" in p.stdout, (
        f"an output tensor was written after invoke() raised: {p.stdout.strip()}"
    )
