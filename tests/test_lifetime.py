"""Lifetime and threading: which of delegate and interpreter goes first (module globals at
shutdown included), many create/destroy cycles without growth in memory or OpenCL objects
(counted by a shim OpenCL library the delegate loads through CLGPU_OPENCL_LIBRARY), and
concurrent invokes from threads.

    CLGPU_LIFETIME_CYCLES=1000 pytest tests/test_lifetime.py   # the full-teardown cycles, by hand
"""

from __future__ import annotations

import gc
import json
import os
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faults.helpers import KINDS
from parity import compare, cpu_op, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import interpreter_module, make_interpreter

# Cycles that keep one delegate alive (the environment and its programs stay): cheap.
CYCLES = 1000
# Cycles in which the last delegate dies each time, so the OpenCL context and every program go
# too: ~0.1 s each on a 2-core PoCL (programs come back from PoCL's own disk cache), so CI runs
# 200 and CLGPU_LIFETIME_CYCLES=1000 runs the full figure by hand.
FULL_TEARDOWN_CYCLES = int(os.environ.get("CLGPU_LIFETIME_CYCLES", "200"))
RSS_BUDGET_KB = 5 * 1024


def tiny_model(seed: int = 0) -> bytes:
    """conv | CUMSUM | add: two partitions, a few hundred bytes of weights."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 5, 4, 2))
    y = b.conv2d(x, b.rand((3, 3, 3, 2)), b.rand((3,)), activation="RELU")
    y = cpu_op(b, y)
    b.output(b.add(y, b.rand((3,))))
    return b.build()


def mixed_model(seed: int) -> bytes:
    """Every claimed op once, for the thread tests."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (2, 7, 6, 3))
    y = b.conv2d(x, b.rand((5, 3, 3, 3)), b.rand((5,)), activation="RELU6")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 10), scale=0.5), depth_multiplier=2, stride=2)
    y = b.fully_connected(y, b.rand((4, 10)), keep_num_dims=True)
    y = b.add(y, b.rand((4,)))
    b.output(b.transpose(y, (0, 3, 1, 2)))
    return b.build()


def reference(model: bytes, runtime: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    return run(ref, inputs)


# ---- shutdown order, in fresh processes ----------------------------------------------------

PRELUDE = """
import atexit, gc, sys, threading
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import interpreter_module, make_interpreter
MODEL = open("model.tflite", "rb").read()
X = np.load("input.npy")
EXPECTED = np.load("expected.npy")
RT = sys.argv[1]
def check(interp):
    interp.set_tensor(interp.get_input_details()[0]["index"], X)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    assert np.allclose(got, EXPECTED, rtol=1e-4, atol=1e-5), np.abs(got - EXPECTED).max()
    print("CHECKED", flush=True)
"""

SHUTDOWN_CASES = {
    # Module globals: Python tears them down in its own order at exit.
    "globals_delegate_defined_first": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors(); check(interp)
    """,
    "globals_interpreter_defined_first": """
        interp = None
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors(); check(interp)
        del delegate  # only the interpreter's reference is left for shutdown
    """,
    "delegate_deleted_then_invoke": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors()
        del delegate; gc.collect()
        check(interp); check(interp)
    """,
    "delegate_closed_then_invoke_and_resize": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors(); delegate.close(); check(interp)
        # Reallocation after close still plans the partitions (their own backend reference).
        interp.allocate_tensors(); check(interp)
    """,
    "interpreter_deleted_then_delegate_reused": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors(); check(interp)
        del interp; gc.collect()
        print(delegate.stats())
        interp2 = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp2.allocate_tensors(); check(interp2)
    """,
    "plugin_deleted_then_invoke": """
        plugin = interpreter_module(RT).load_delegate(clgpu_delegate.plugin_path(), {})
        interp = make_interpreter(MODEL, [plugin], runtime=RT, reference=True)
        interp.allocate_tensors()
        del plugin; gc.collect()
        check(interp)
    """,
    "plugin_globals": """
        plugin = interpreter_module(RT).load_delegate(clgpu_delegate.plugin_path(), {})
        interp = make_interpreter(MODEL, [plugin], runtime=RT, reference=True)
        interp.allocate_tensors(); check(interp)
    """,
    "invoke_from_atexit": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors()
        atexit.register(check, interp)
    """,
    "reference_cycle_collected_at_exit": """
        class Holder:
            pass
        h = Holder(); h.self = h
        h.delegate = clgpu_delegate.load()
        h.interp = make_interpreter(MODEL, [h.delegate], runtime=RT, reference=True)
        h.interp.allocate_tensors(); check(h.interp)
        del h
    """,
    "daemon_thread_invoking_at_exit": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT, reference=True)
        interp.allocate_tensors(); check(interp)
        def spin():
            while True:
                interp.invoke()
        threading.Thread(target=spin, daemon=True).start()
        import time; time.sleep(0.3)
    """,
}


@pytest.mark.parametrize("case", SHUTDOWN_CASES)
def test_shutdown_order(case: str, runtime: str, run_python: Callable,
                        tmp_path: Path) -> None:
    model = tiny_model()
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 1)
    (tmp_path / "model.tflite").write_bytes(model)
    np.save(tmp_path / "input.npy", inputs[0])
    np.save(tmp_path / "expected.npy", run(ref, inputs)[0])
    code = PRELUDE + textwrap.dedent(SHUTDOWN_CASES[case]) + "\nprint('DONE', flush=True)\n"
    p = run_python(["-c", code, runtime])
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert "DONE" in p.stdout and "CHECKED" in p.stdout, p.stdout
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


def test_interpreter_destroyed_first_in_process(runtime: str) -> None:
    model = tiny_model(2)
    delegate = clgpu_delegate.load()
    inputs = random_inputs(make_interpreter(model, runtime=runtime).get_input_details(), 3)
    expected = reference(model, runtime, inputs)
    for round_ in range(3):
        interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
        interp.allocate_tensors()
        compare(run(interp, inputs), expected, 1e-4, None, f" round {round_}")
        del interp
        gc.collect()
        # The delegate outlives its interpreters and stays usable.
        assert delegate.stats().kernels_created == 2 * (round_ + 1)
        assert delegate.delegated_nodes() == [0, 2]


# ---- create/destroy cycles: memory and OpenCL objects --------------------------------------

CYCLE_SCRIPT = """
import ctypes, gc, json, os, sys, time
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter
RT, CYCLES, WARMUP, ANCHOR = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
MODEL = open("model.tflite", "rb").read()
X = np.load("input.npy")
EXPECTED = np.load("expected.npy")
shim = ctypes.CDLL(os.environ["CLGPU_OPENCL_LIBRARY"])
KINDS = @KINDS@
def counts():
    a = (ctypes.c_long * (2 * len(KINDS)))()
    shim.clgpu_shim_counts(a)
    r = (ctypes.c_long * len(KINDS))()
    shim.clgpu_shim_retains(r)
    return {k: {"created": a[i], "released": a[len(KINDS) + i], "retained": r[i]}
            for i, k in enumerate(KINDS)}
def live():
    return {k: v["created"] - v["released"] for k, v in counts().items()}
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
anchor = clgpu_delegate.load() if ANCHOR else None
def cycle(i):
    d = clgpu_delegate.load()
    interp = make_interpreter(MODEL, [d], runtime=RT, reference=True)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], X)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    assert np.allclose(got, EXPECTED, rtol=1e-4, atol=1e-5), (i, np.abs(got - EXPECTED).max())
    built = d.stats().programs_built
    del interp, d
    return built
for i in range(WARMUP):
    cycle(i)
gc.collect()
rss0, live0 = rss_kb(), live()
built0 = anchor.stats().programs_built if anchor else None
t0 = time.perf_counter()
built = set()
for i in range(CYCLES):
    built.add(cycle(i))
    if i % 100 == 99:
        gc.collect()
elapsed = time.perf_counter() - t0
gc.collect()
rss1, live1 = rss_kb(), live()
result = {"rss_before_kb": rss0, "rss_after_kb": rss1, "live_before": live0,
          "live_after": live1, "seconds": elapsed, "programs_built_per_cycle": sorted(built),
          "anchor_programs_built": [built0, anchor.stats().programs_built if anchor else None]}
del anchor
gc.collect()
result["live_at_end"] = live()
result["totals"] = counts()
print(json.dumps(result))
""".replace("@KINDS@", repr(KINDS))


def _run_cycles(runtime: str, run_python: Callable, tmp_path: Path, shim: Path, cycles: int,
                warmup: int, anchor: bool) -> dict[str, Any]:
    model = tiny_model(5)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 5)
    (tmp_path / "model.tflite").write_bytes(model)
    np.save(tmp_path / "input.npy", inputs[0])
    np.save(tmp_path / "expected.npy", run(ref, inputs)[0])
    p = run_python(["-c", CYCLE_SCRIPT, runtime, str(cycles), str(warmup), str(int(anchor))],
                   env={"CLGPU_OPENCL_LIBRARY": str(shim), "CLGPU_LOG": "error"}, timeout=1800)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    r = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"{runtime} cycles={cycles} anchor={anchor}: {r['seconds']:.1f} s, RSS "
          f"{r['rss_before_kb']} -> {r['rss_after_kb']} kB, live {r['live_after']}, "
          f"at end {r['live_at_end']}, programs built per cycle {r['programs_built_per_cycle']}")
    return r


# Under AddressSanitizer (.ci/sanitize.sh) freed memory sits in its quarantine: RSS says
# nothing there, LeakSanitizer judges leaks instead.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def _check_cycles(r: dict[str, Any], anchor: bool) -> None:
    growth = r["rss_after_kb"] - r["rss_before_kb"]
    assert UNDER_ASAN or growth < RSS_BUDGET_KB, f"RSS grew by {growth} kB: {r}"
    # Every object a cycle creates, it releases: the live counts return to the warmed-up ones,
    # and to zero once the last delegate is gone (no context, buffer or mapping left behind).
    assert r["live_after"] == r["live_before"], r
    assert all(v == 0 for v in r["live_at_end"].values()), r["live_at_end"]
    assert r["totals"]["kernels"]["created"] > 0, "the shim saw no kernels: not loaded?"
    if anchor:
        # One environment for the whole run: each program is built once (cache hits after).
        before, after = r["anchor_programs_built"]
        assert before == after, r
        # New contexts: created minus extra references (NVIDIA's SVM arena retains one).
        contexts = r["totals"]["contexts"]
        assert contexts["created"] - contexts["retained"] == 1, r["totals"]


def test_create_destroy_cycles_with_a_live_delegate(runtime: str, run_python: Callable,
                                                    tmp_path: Path, opencl_shim: Path) -> None:
    """1,000 x (load + interpreter + invoke + del) while the app holds one delegate."""
    r = _run_cycles(runtime, run_python, tmp_path, opencl_shim, CYCLES, 100, anchor=True)
    _check_cycles(r, anchor=True)


def test_create_destroy_cycles_full_teardown(run_python: Callable, tmp_path: Path,
                                             opencl_shim: Path) -> None:
    """No delegate survives a cycle: the OpenCL context, queue and programs are rebuilt and
    released every time (one runtime: this part does not depend on it)."""
    from conftest import RUNTIMES, _importable

    runtime = next((rt for rt in RUNTIMES if _importable(rt)), None)
    if runtime is None:
        pytest.skip("no interpreter package")
    r = _run_cycles(runtime, run_python, tmp_path, opencl_shim, FULL_TEARDOWN_CYCLES, 50,
                    anchor=False)
    _check_cycles(r, anchor=False)
    contexts = r["totals"]["contexts"]
    assert contexts["created"] - contexts["retained"] == FULL_TEARDOWN_CYCLES + 50, r["totals"]


# ---- threads -------------------------------------------------------------------------------


def _threads(work: Callable[[int], None], n: int, timeout: float = 300) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert not errors, errors[0]


def test_concurrent_invokes_separate_and_shared_delegates(runtime: str) -> None:
    """Four interpreters invoked from four threads at once: two with their own delegates, two
    sharing one (its queue serialises them)."""
    shared = clgpu_delegate.load()
    delegates = [clgpu_delegate.load(), clgpu_delegate.load(), shared, shared]
    models = [mixed_model(10 + i) for i in range(4)]
    interps, cases = [], []
    for model, delegate in zip(models, delegates, strict=True):
        interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
        interp.allocate_tensors()
        interps.append(interp)
        ins = [random_inputs(interp.get_input_details(), s) for s in range(3)]
        cases.append([(x, reference(model, runtime, x)) for x in ins])
    loops = 20

    def work(i: int) -> None:
        for it in range(loops):
            inputs, expected = cases[i][it % 3]
            compare(run(interps[i], inputs), expected, 1e-4, None, f" thread {i} loop {it}")

    _threads(work, 4)
    assert [d.stats().invokes for d in delegates[:2]] == [loops, loops]
    assert shared.stats().invokes == 2 * loops


def test_create_and_destroy_while_another_thread_invokes(runtime: str) -> None:
    """Delegates come and go in one thread (the shared environment's weak cache is hit and
    refilled) while another thread keeps invoking: no crash, every result right."""
    model = mixed_model(20)
    keeper = clgpu_delegate.load()
    interp = make_interpreter(model, [keeper], runtime=runtime, reference=True)
    interp.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), 0)
    expected = reference(model, runtime, inputs)
    stop = threading.Event()

    def work(i: int) -> None:
        if i == 0:
            n = 0
            while not stop.is_set() or n < 5:
                compare(run(interp, inputs), expected, 1e-4, None, f" invoke {n}")
                n += 1
        else:
            try:
                for k in range(25):
                    d = clgpu_delegate.load()
                    other = make_interpreter(model, [d], runtime=runtime, reference=True)
                    other.allocate_tensors()
                    compare(run(other, inputs), expected, 1e-4, None, f" cycle {k}")
                    del other, d
            finally:
                stop.set()

    _threads(work, 2)


def test_plugin_delegates_from_threads(runtime: str) -> None:
    """The C plugin entry points (create/destroy) from several threads at once."""
    mod = interpreter_module(runtime)
    model = mixed_model(30)
    inputs = random_inputs(make_interpreter(model, runtime=runtime).get_input_details(), 1)
    expected = reference(model, runtime, inputs)

    def work(i: int) -> None:
        for k in range(8):
            plugin = mod.load_delegate(clgpu_delegate.plugin_path(), {})
            interp = make_interpreter(model, [plugin], runtime=runtime, reference=True)
            interp.allocate_tensors()
            compare(run(interp, inputs), expected, 1e-4, None, f" thread {i} round {k}")
            del interp, plugin

    _threads(work, 3)
