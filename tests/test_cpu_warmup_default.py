"""cpu_warmup is on by default: a cold start's first invokes run TFLite's own CPU kernels while
the programs build, and the setup ending during such an invoke ends the CPU's run, so the invoke
finishes on the device instead of waiting for the last CPU kernel (runtime/partition_warmup.cc).
The suite sets $CLGPU_CPU_WARMUP=0 for its parity tests; these tests remove it to see the default.
$CLGPU_SETUP_DELAY_MS holds the setup thread so the timing does not depend on the program cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parity import FP32_RTOL, compare, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

HOLD = "CLGPU_SETUP_DELAY_MS"


def small() -> bytes:
    b = ModelBuilder(seed=41)
    x = b.input("x", (1, 8, 8, 4))
    y = b.conv2d(x, b.rand((8, 3, 3, 4)), b.rand((8,)), activation="RELU")
    b.output(b.add(y, b.rand((8,))))
    return b.build()


def slow_on_the_cpu(layers: int = 16) -> bytes:
    """A chain of 3x3 convolutions on 96x96x64: several hundred ms on TFLite's kernels on one
    thread, each layer tens of ms, so a setup held for 100 ms ends well inside the first
    invoke."""
    b = ModelBuilder(seed=42)
    y = b.input("x", (1, 96, 96, 64))
    for _ in range(layers):
        w = b.rand((64, 3, 3, 64), scale=(2 / (9 * 64)) ** 0.5)
        y = b.conv2d(y, w, b.rand((64,), scale=0.1), activation="RELU")
    b.output(y)
    return b.build()


def _inputs(it: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.standard_normal(d["shape"]).astype(np.float32) for d in it.get_input_details()]


def _reference(
    model: bytes, runtime: str, threads: int = 1
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    ref = make_interpreter(model, runtime=runtime, reference=True, num_threads=threads)
    ref.allocate_tensors()
    inputs = _inputs(ref)
    return inputs, run(ref, inputs)


def _interp(model: bytes, runtime: str, **options: Any) -> tuple[Any, Any]:
    d = clgpu_delegate.load(partitioning="all", **options)
    it = make_interpreter(model, [d], runtime=runtime, reference=True, num_threads=1)
    it.allocate_tensors()
    return d, it


@pytest.mark.quick
def test_default_is_on_and_the_variable_turns_it_off(runtime: str, monkeypatch) -> None:
    model = small()
    inputs, want = _reference(model, runtime)
    monkeypatch.delenv("CLGPU_CPU_WARMUP", raising=False)
    monkeypatch.setenv(HOLD, "60000")
    d, it = _interp(model, runtime)
    np.testing.assert_array_equal(run(it, inputs)[0], want[0])  # TFLite's kernels: exact
    s = d.stats()
    assert (s.warmups, s.cpu_invokes, s.invokes) == (1, 1, 0)
    del it
    monkeypatch.setenv("CLGPU_CPU_WARMUP", "0")
    d, it = _interp(model, runtime)
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    s = d.stats()
    assert (s.warmups, s.cpu_invokes, s.invokes) == (0, 0, 1)
    monkeypatch.setenv("CLGPU_CPU_WARMUP", "sometimes")
    with pytest.raises(ValueError, match="CLGPU_CPU_WARMUP"):
        clgpu_delegate.load()


def test_setup_ending_mid_invoke_finishes_on_the_device(runtime: str, monkeypatch) -> None:
    model = slow_on_the_cpu()
    inputs, want = _reference(model, runtime)
    # Programs built once, so the held setup's bind only loads them from the process's cache:
    # the first delegate is kept, and with it the device's environment that caches them (without
    # it they were built again, in 1.2 s on Intel's CPU runtime, which keeps no cache on disk).
    first = _interp(model, runtime, cpu_warmup=False)
    monkeypatch.setenv(HOLD, "100")
    d, it = _interp(model, runtime, cpu_warmup=True)
    got = run(it, inputs)
    s = d.stats()
    assert (s.cpu_invokes, s.invokes, s.warming) == (0, 1, 0), s
    compare(got, want, FP32_RTOL, None, runtime)
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert (d.stats().cpu_invokes, d.stats().invokes) == (0, 2)
    del first


def test_setup_failing_mid_invoke_goes_on_on_the_cpu(runtime: str, shim_results: Any) -> None:
    """The CPU's run stops when the setup ends, failed or not; after a failure it goes on from the
    node it stopped at, and the result is TFLite's own. The setup's first allocation fails in the
    driver (the OpenCL shim, in a child process: faults/shim_warmup.py)."""
    r = shim_results(runtime)["warmup_mid_invoke"]
    assert "crashed" not in r and not r["leaked"], r
    assert r["first"] == "ok", r  # bit for bit
    assert (r["stats"]["cpu_invokes"], r["stats"]["invokes"]) == (1, 0), r
    assert "its device setup failed" in r["stderr"], r["stderr"]


def test_warmup_threads_keep_tflites_numbers(runtime: str, monkeypatch) -> None:
    """The warm-up's CPU kernels on more threads than the interpreter's one (as on a host of four
    or more cores): TFLite's numbers on that many threads (its multi-threaded convolution, chosen
    at prepare, sums in another order than the one-thread kernel), run after run."""
    model = slow_on_the_cpu(layers=3)
    inputs, want = _reference(model, runtime, threads=2)
    monkeypatch.setenv(HOLD, "60000")
    monkeypatch.setenv("CLGPU_WARMUP_THREADS", "2")
    d, it = _interp(model, runtime, cpu_warmup=True)
    for _ in range(2):
        for g, w in zip(run(it, inputs), want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert d.stats().cpu_invokes == 2
