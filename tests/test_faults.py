"""Faults at each stage a user meets (creating the delegate, building the interpreter,
allocate_tensors(), invoke()), made by the driver: the OpenCL shim (faults/opencl_shim.c) fails
the call a real failure at that stage comes from, so the delegate's own error paths run. Each
behaviour written down in docs/faults.md, asserted in both runtimes and through both entry points
(load() and the plugin). The scenarios are in faults/shim_stages.py and run in one child per
runtime with the others (the shim_results fixture).
Single OpenCL calls failing once are in test_faults_opencl.py, corrupt cached binaries in
test_faults_cache.py, bad models in test_faults_models.py, unsupported variants in
test_faults_unsupported.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import clgpu_delegate

ENTRIES = ["load", "plugin"]
Results = Callable[[str], dict[str, dict[str, Any]]]


def result(shim_results: Results, runtime: str, scenario: str) -> dict[str, Any]:
    r = shim_results(runtime)[scenario]
    assert "crashed" not in r, f"the process died: {r}"
    assert not r["leaked"], f"OpenCL objects left after the scenario: {r['leaked']}"
    return r


def raised(outcome: str, kind: str, *words: str) -> None:
    assert outcome.startswith(f"raised {kind}:"), outcome
    for w in words:
        assert w in outcome, (w, outcome)


# ---- create: no platform to list ----------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES)
def test_create_fault_raises_then_load_works(
    entry: str, runtime: str, shim_results: Results
) -> None:
    """The driver fails while the delegate lists the devices. (No platform at all, which the
    ICD loader and the delegate remember for the process, gives NoDeviceError with the install
    hint: test_opencl_runtime.py's test_no_platform, in a process of its own.)"""
    r = result(shim_results, runtime, "platforms" if entry == "load" else "create_plugin")
    # load(): OpenCLError (a RuntimeError); the plugin: ValueError from load_delegate.
    kind = "OpenCLError" if entry == "load" else "ValueError"
    raised(r["first"], kind, "clGetPlatformIDs", "CL_OUT_OF_HOST_MEMORY")
    assert issubclass(clgpu_delegate.OpenCLError, RuntimeError)
    assert r["then"] == "ok", r  # nothing was created; the next delegate works
    if entry == "plugin":
        assert "DELEGATE" in r["then_ops"], r


# ---- prepare: its one OpenCL call, the probe build -----------------------------------------


def test_probe_fault_at_prepare_keeps_the_model_on_the_cpu(
    runtime: str, shim_results: Results
) -> None:
    """Prepare builds one program before claiming (cpu_warmup off); when the driver fails it,
    the interpreter is built all the same, on the CPU, with a warning naming the call."""
    r = result(shim_results, runtime, "probe_program")
    assert r["construct"] == "ok" and r["delegated"] == [], r
    warning = r["stderr"]
    assert "the device cannot build our kernels; running on the CPU" in warning, warning
    assert "clCreateProgramWithSource" in warning and "CL_OUT_OF_HOST_MEMORY" in warning
    assert r["first"] == "ok", r  # TFLite's own kernels: bit-identical
    # Not remembered: the next interpreter with the same delegate claims.
    assert r["then_delegated"] and r["then"] == "ok", r


# ---- build: the compiler refuses our source, the model runs on the CPU ---------------------


@pytest.mark.parametrize("entry", ENTRIES)
def test_build_fault_warns_and_falls_back_to_the_cpu(
    entry: str, runtime: str, shim_results: Results
) -> None:
    r = result(shim_results, runtime, f"build_{entry}")
    warning = r["stderr"]
    assert "the device cannot build our kernels; running on the CPU" in warning, warning
    # The warning carries what a bug report needs: the program, the options, the compiler's log.
    assert "failed to build with options" in warning and "-cl-std=CL1.2" in warning, warning
    assert "clgpu shim: injected build failure" in warning, warning
    assert "DELEGATE" not in r["ops"], r["ops"]
    if entry == "load":
        assert r["delegated"] == [], r
        reasons = dict(r["reasons"])
        assert "activation" in reasons.pop("2")  # the ADD with a fused TANH
        assert all("build failed" in x for x in reasons.values()), reasons
        assert r["kernels_created"] == 0 and r["invokes"] == 0, r
    assert r["first"] == "ok", r  # the same CPU kernels as the reference: bit-identical
    # The failed build is not remembered: a healthy delegate builds and claims.
    assert r["then"] == "ok", r


# ---- alloc: allocate_tensors() raises, every time ------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES)
def test_allocation_fault_raises_every_time(
    entry: str, runtime: str, shim_results: Results
) -> None:
    r = result(shim_results, runtime, f"alloc_{entry}")
    assert len(r["allocate"]) == 2
    for outcome in r["allocate"]:
        raised(
            outcome,
            "RuntimeError",
            "clgpu_delegate: prepare failed",
            "clCreateBuffer",
            "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        )
    # invoke() on the half-allocated interpreter raises too: no output is ever produced.
    raised(r["invoke"], "RuntimeError", "not ready")
    assert r["then"] == "ok", r


# ---- invoke and read: invoke() raises with the OpenCL error, every time --------------------


INVOKE_FAULTS = {"invoke": "clEnqueueNDRangeKernel", "read": "clEnqueueReadBuffer"}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("stage", list(INVOKE_FAULTS))
def test_invoke_fault_raises_every_time(
    stage: str, entry: str, runtime: str, shim_results: Results
) -> None:
    r = result(shim_results, runtime, f"{stage}_{entry}")
    assert len(r["invokes"]) == 3
    for outcome in r["invokes"]:  # never returns as if the outputs were fresh
        raised(
            outcome,
            "RuntimeError",
            INVOKE_FAULTS[stage],
            "CL_OUT_OF_RESOURCES",
            "clgpu_delegate: invoke failed",
        )
    if entry == "load":
        assert r["counted"] == 0, r  # no partition counted as run
    # Once the driver recovers: the same interpreter, then a new one, give correct output.
    assert r["same"] == "ok" and r["then"] == "ok", r


@pytest.mark.parametrize("stage", list(INVOKE_FAULTS))
def test_invoke_fault_with_a_shared_delegate_keeps_other_interpreters_going(
    stage: str, runtime: str, shim_results: Results
) -> None:
    """Two interpreters on one delegate fail in turn, without deadlock (the queue lock is
    released on the error path); another delegate's interpreter in between is not disturbed."""
    r = result(shim_results, runtime, f"shared_{stage}")
    for first, good, second in r["rounds"]:
        assert good == "ok", r
        for outcome in (first, second):
            raised(outcome, "RuntimeError", INVOKE_FAULTS[stage])
    assert r["good_invokes"] == 4, r  # two partitions, two rounds
    assert r["recovered"] == ["ok"] * 3, r
