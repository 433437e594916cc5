"""Injected faults (the test-only `fail_at` option): each behaviour written down in
docs/faults.md, asserted in both runtimes and through both entry points (load() and the plugin).
Real OpenCL errors (a shim library) are in test_faults_opencl.py, corrupt cached binaries in
test_faults_cache.py, bad models in test_faults_models.py, unsupported variants in
test_faults_unsupported.py."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

# KINDS, build_opencl_shim: test_lifetime.py imports the shim's builder from here.
from faults.helpers import KINDS, MODEL, build_opencl_shim, reference  # noqa: F401
from parity import check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.runtime import interpreter_module, make_interpreter

RUNTIME_MESSAGE_PREPARE = "Restored original execution plan"


def faulty(runtime: str, fail_at: str, entry: str) -> Any:
    """A delegate with `fail_at`, made through load() or through the plugin."""
    if entry == "load":
        return clgpu_delegate.load(fail_at=fail_at)
    return interpreter_module(runtime).load_delegate(
        clgpu_delegate.plugin_path(), {"fail_at": fail_at}
    )


def set_inputs(interp: Any, inputs: list[np.ndarray]) -> None:
    for d, x in zip(interp.get_input_details(), inputs, strict=True):
        interp.set_tensor(d["index"], x)


def assert_healthy_delegate_works(runtime: str, model: bytes = MODEL) -> None:
    """Recovery: a new interpreter with a delegate without the fault, in the same process."""
    check_parity(model, runtime, expect_cpu={2}, seed=3)


ENTRIES = ["load", "plugin"]

# ---- create --------------------------------------------------------------------------------


def test_create_fault_raises_no_device_error_then_load_works(runtime: str) -> None:
    with pytest.raises(clgpu_delegate.NoDeviceError, match="injected failure at create"):
        clgpu_delegate.load(fail_at="create")
    assert issubclass(clgpu_delegate.NoDeviceError, RuntimeError)
    assert_healthy_delegate_works(runtime)


def test_create_fault_through_the_plugin_raises_value_error(runtime: str) -> None:
    with pytest.raises(ValueError, match="injected failure at create"):
        faulty(runtime, "create", "plugin")
    assert_healthy_delegate_works(runtime)


# ---- prepare -------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES)
def test_prepare_fault_refuses_the_interpreter_and_the_model_still_runs(
    entry: str, runtime: str
) -> None:
    with pytest.raises(RuntimeError) as err:
        make_interpreter(
            MODEL, [faulty(runtime, "prepare", entry)], runtime=runtime, reference=True
        )
    assert "clgpu_delegate: Prepare failed: injected failure at Prepare" in str(err.value)
    assert RUNTIME_MESSAGE_PREPARE in str(err.value)
    # The documented way on: the same model without the delegate (all on the CPU) ...
    cpu = make_interpreter(MODEL, None, runtime=runtime, reference=True)
    cpu.allocate_tensors()
    inputs = random_inputs(cpu.get_input_details(), 1)
    compare(run(cpu, inputs), reference(runtime, inputs), 0, 0)
    # ... or a healthy delegate.
    assert_healthy_delegate_works(runtime)


# ---- init and alloc: allocate_tensors raises, every time ----------------------------------


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    ("fail_at", "words"),
    [
        ("init", ["clgpu_delegate: kernel init failed", "injected failure at kernel init"]),
        (
            "alloc",
            [
                "clgpu_delegate: prepare failed",
                "clCreateBuffer",
                "CL_MEM_OBJECT_ALLOCATION_FAILURE",
            ],
        ),
    ],
)
def test_allocation_time_fault_raises_every_time(
    fail_at: str, words: list[str], entry: str, runtime: str
) -> None:
    interp = make_interpreter(
        MODEL, [faulty(runtime, fail_at, entry)], runtime=runtime, reference=True
    )
    for _ in range(2):
        with pytest.raises(RuntimeError) as err:
            interp.allocate_tensors()
        for w in words:
            assert w in str(err.value)
    # invoke() on the half-allocated interpreter raises too: no output is ever produced.
    with pytest.raises(RuntimeError, match="not ready"):
        interp.invoke()
    del interp
    assert_healthy_delegate_works(runtime)


# ---- build: the real build path fails, the model runs on the CPU ---------------------------


@pytest.mark.parametrize("entry", ENTRIES)
def test_build_fault_warns_and_falls_back_to_the_cpu(
    entry: str, runtime: str, capfd: pytest.CaptureFixture[str]
) -> None:
    delegate = faulty(runtime, "build", entry)
    interp = make_interpreter(MODEL, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    warning = capfd.readouterr().err
    if os.environ.get("CLGPU_LOG", "warning") in ("warning", "info", "debug"):
        assert "the device cannot build our kernels; running on the CPU" in warning, warning
        # The warning carries what a bug report needs: the program, the options, the log.
        assert "failed to build with options" in warning, warning
        assert "-DCLGPU_INJECT_BUILD_FAILURE" in warning and "injected build failure" in warning
    ops = [op["op_name"] for op in interp._get_ops_details()]
    assert "DELEGATE" not in ops, ops
    if entry == "load":
        assert not delegate.delegated_nodes()
        reasons = {d["node"]: d["reason"] for d in delegate.decisions()}
        assert "activation" in reasons.pop(2)  # the ADD with a fused TANH
        assert all("build failed" in r for r in reasons.values()), reasons
        assert delegate.stats()["kernels_created"] == 0
    for seed in range(2):
        inputs = random_inputs(interp.get_input_details(), seed)
        # The same CPU kernels as the reference: bit-identical.
        compare(run(interp, inputs), reference(runtime, inputs), 0, 0)
    if entry == "load":
        assert delegate.stats()["invokes"] == 0
    # The failed build is not cached under the healthy delegate's key.
    assert_healthy_delegate_works(runtime)


# ---- invoke and read: invoke() raises with the OpenCL error, every time --------------------


INVOKE_FAULTS = [
    ("invoke", ["clEnqueueNDRangeKernel", "CL_OUT_OF_RESOURCES"]),
    ("read", ["clEnqueueReadBuffer", "CL_OUT_OF_RESOURCES"]),
]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("fail_at", "words"), INVOKE_FAULTS)
def test_invoke_fault_raises_every_time(
    fail_at: str, words: list[str], entry: str, runtime: str
) -> None:
    delegate = faulty(runtime, fail_at, entry)
    interp = make_interpreter(MODEL, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    out = interp.get_output_details()[0]["index"]
    for seed in range(3):
        inputs = random_inputs(interp.get_input_details(), seed)
        set_inputs(interp, inputs)
        with pytest.raises(RuntimeError) as err:
            interp.invoke()  # never returns as if the outputs were fresh
        for w in words:
            assert w in str(err.value), str(err.value)
        assert "clgpu_delegate: invoke failed" in str(err.value)
        interp.get_tensor(out)  # reading the (undefined) output does not crash
    if entry == "load":
        assert delegate.stats()["invokes"] == 0  # no partition counted as run
    del interp
    # The next interpreter with a healthy delegate, same process, same inputs: correct output.
    assert_healthy_delegate_works(runtime)


@pytest.mark.parametrize(("fail_at", "words"), INVOKE_FAULTS)
def test_invoke_fault_with_a_shared_delegate_keeps_other_interpreters_going(
    fail_at: str, words: list[str], runtime: str
) -> None:
    """Two interpreters on one faulty delegate: both raise, alternately, without deadlock (the
    queue lock is released on the error path); a healthy delegate's interpreter in between
    is not disturbed."""
    bad = clgpu_delegate.load(fail_at=fail_at)
    good = clgpu_delegate.load()
    interps = []
    for delegate in (bad, good, bad):
        interp = make_interpreter(MODEL, [delegate], runtime=runtime, reference=True)
        interp.allocate_tensors()
        interps.append(interp)
    inputs = random_inputs(interps[0].get_input_details(), 4)
    expected = reference(runtime, inputs)
    for _ in range(2):
        for i, interp in enumerate(interps):
            if i == 1:
                compare(run(interp, inputs), expected, 1e-4, None)
                continue
            set_inputs(interp, inputs)
            with pytest.raises(RuntimeError, match=words[0]):
                interp.invoke()
    assert good.stats()["invokes"] == 4  # two partitions, two rounds
