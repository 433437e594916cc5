"""cpu_warmup with many partitions (runtime/tensor_room.h): before each CPU kernel's prepare a
partition keeps TFLite's promise of room for 16 new tensors in the context's tensor list. Every
partition used to learn that room anew with a probe that fills the list to its capacity, so each
partition's prepare doubled the list: 17 real dynamic-range models (int8-weight FULLY_CONNECTED
and CONV left on the CPU between delegated pieces) of 21 or more partitions failed to prepare
with std::bad_alloc after growing to about 24 GB. The partitions now share what is known of the
room and take TFLite's own promise at their prepare.

Each run is a child process under an address-space limit, so the bug fails the test instead of
bringing the machine down."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tflite
from parity import FP32_RTOL, compare, cpu_op, run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.modelgen._quant import symmetric_weights
from clgpu_delegate.runtime import make_interpreter

PARTS = 24

CHILD = """
import json, os, resource, sys
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

if "libasan" not in os.environ.get("LD_PRELOAD", ""):
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def hwm_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmHWM"))


runtime, warm = sys.argv[1], sys.argv[2] == "on"
model, x = open("model.tflite", "rb").read(), np.load("x.npy")
base = hwm_mb()
d = clgpu_delegate.load(partitioning="all", cpu_warmup=warm)
it = make_interpreter(model, [d], runtime=runtime, reference=True, num_threads=1)
it.allocate_tensors()


def invoke():
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


first = invoke()
ready = d.wait_ready(timeout=300)
then = invoke()
np.savez("out.npz", first=first, then=then)
s = d.stats()
print(json.dumps({
    "partitions": len(d.partitions()), "ready": ready, "warmups": s.warmups,
    "cpu_invokes": s.cpu_invokes, "invokes": s.invokes,
    "tensors": it._interpreter.NumTensors(0), "growth_mb": hwm_mb() - base,
}))
"""


def hybrid_fc(b: ModelBuilder, x: int, n_out: int) -> int:
    """FULLY_CONNECTED with int8 weights on a float input (dynamic range, as a converter writes
    it), kept on TFLite's CPU as the real models' were before the delegate claimed such weights:
    a weight zero point of 1, which the delegate declines (TFLite's hybrid kernel ignores it)."""
    q, qp = symmetric_weights(b.rand((n_out, b.shape(x)[-1]), scale=0.15), axis=None)
    w = b.const(q)
    b.set_quant(w, qp.scale, (1,), axis=0)
    return b._op(
        tflite.BuiltinOperator.FULLY_CONNECTED,
        [x, w, b.const(b.rand((n_out,), scale=0.1))],
        [b.shape(x)[:-1] + (n_out,)],
        version=5,
        options="FullyConnectedOptions",
        KeepNumDims=True,
    )[0]


def many_partitions(parts: int, between: str) -> bytes:
    """`parts` partitions of a 3x3 conv and an ADD, each followed by an op on the CPU (CUMSUM, or a
    dynamic-range FULLY_CONNECTED as in the real models that failed). The conv's CPU kernel adds
    its temporaries at its first prepare, so the ADD after it needs room that TFLite's promise at
    the partition's prepare no longer covers."""
    b = ModelBuilder(seed=51)
    y = b.input("x", (1, 12, 12, 8))
    for _ in range(parts):
        y = b.conv2d(y, b.rand((8, 3, 3, 8), scale=0.2), b.rand((8,), scale=0.1))
        y = b.add(y, b.rand((8,), scale=0.1))
        y = cpu_op(b, y) if between == "sin" else hybrid_fc(b, y, 8)
    b.output(y)
    return b.build()


def _child(
    run_python: Callable[..., Any], tmp_path: Path, runtime: str, warm: bool
) -> tuple[dict[str, Any], Any]:
    # A held setup: the first invoke runs on the CPU kernels whatever the program cache holds.
    p = run_python(
        [*["-c", CHILD], runtime, "on" if warm else "off"],
        env={"CLGPU_SETUP_DELAY_MS": "1000"},
        timeout=400,
    )
    assert p.returncode == 0, f"cpu_warmup={warm}: {p.stderr[-3000:]}"
    # Read now: the next child writes the same file, under a lazy reader of this one.
    with np.load(tmp_path / "out.npz") as out:
        return json.loads(p.stdout.strip().splitlines()[-1]), dict(out)


@pytest.mark.parametrize("between", ["sin", "hybrid_fc"])
def test_many_partitions_warm_up_in_bounded_memory(
    between: str, runtime: str, run_python: Callable[..., Any], tmp_path: Path
) -> None:
    model = many_partitions(PARTS, between)
    ref = make_interpreter(model, runtime=runtime, reference=True, num_threads=1)
    ref.allocate_tensors()
    x = np.random.default_rng(7).standard_normal((1, 12, 12, 8)).astype(np.float32)
    (want,) = run(ref, [x])
    (tmp_path / "model.tflite").write_bytes(model)
    np.save(tmp_path / "x.npy", x)

    off, off_out = _child(run_python, tmp_path, runtime, warm=False)
    on, on_out = _child(run_python, tmp_path, runtime, warm=True)
    assert off["partitions"] == on["partitions"] == PARTS, (off, on)
    assert (on["warmups"], on["cpu_invokes"], on["invokes"]) == (PARTS, PARTS, PARTS), on
    assert on["ready"] and off["ready"], (off, on)
    # The first invoke on TFLite's own kernels: the reference's numbers; then the device's.
    np.testing.assert_array_equal(on_out["first"], want)
    for got in (on_out["then"], off_out["first"], off_out["then"]):
        compare([got], [want], FP32_RTOL, None, f"[{runtime}]")
    # The probes' empty tensors: the list once filled to its capacity and grown, not doubled per
    # partition (2^24 times the model's tensors with the bug).
    assert on["tensors"] <= 4 * off["tensors"] + 64, (off, on)
    # Peak host memory: the CPU kernels' arenas and the setup threads, not the whole process
    # again per partition.
    assert on["growth_mb"] <= 3 * off["growth_mb"] + 256, (off, on)
