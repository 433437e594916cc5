"""A real model with the delegate against stock TFLite CPU kernels: the largest output difference,
what the delegate claimed, and the device commands (kernels and copies) one invoke enqueues.

    python bench/real_model_parity.py MODEL.tflite [...] [--precision fp32|fp16]
        [--partitioning all|cost] [--batch N] [--runtime tflite_runtime|ai_edge_litert]
        [--invokes N] [--json out.json]

Not a test (the models come from TensorFlow's converter, which the tests never need): the
check behind issue #22's converted models (bench/keras_models.py). Inputs are seeded N(0, 1);
--batch resizes axis 0 of every input first (the models' batch is dynamic). --invokes N: N - 1
more invokes after the first comparison, each with fresh inputs, each compared (state a kernel
keeps between its launches, such as split-K's tile counters, must not leak into the next one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter


def _run(interp: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    for d, x in zip(interp.get_input_details(), inputs, strict=True):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def _interpreter(path: str, delegates: Any, runtime: str, batch: int) -> Any:
    interp = make_interpreter(path, delegates, runtime=runtime, reference=True)
    if batch:
        for d in interp.get_input_details():
            interp.resize_tensor_input(d["index"], [batch, *list(d["shape"][1:])])
    interp.allocate_tensors()
    return interp


def check(
    path: str, precision: str, partitioning: str, batch: int, runtime: str, invokes: int = 1
) -> dict[str, Any]:
    ref = _interpreter(path, None, runtime, batch)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(d["shape"]).astype(d["dtype"]) for d in ref.get_input_details()]
    # The delegate's interpreter runs twice below: so does the reference, or a model that keeps
    # state between invokes (VAR_HANDLE / ASSIGN_VARIABLE: streaming wake-word models) would be
    # compared one step apart.
    _run(ref, inputs)
    expected = _run(ref, inputs)
    delegate = clgpu_delegate.load(precision=precision, partitioning=partitioning, profiling=True)
    interp = _interpreter(path, [delegate], runtime, batch)
    # Until the device setup is done, invokes run TFLite's own CPU kernels (cpu_warmup): the
    # outputs compared must be the device's.
    delegate.wait_ready()
    got = _run(interp, inputs)
    delegate.reset_profile()
    got = _run(interp, inputs)
    decisions = delegate.decisions()
    prof = delegate.profile()
    pairs = list(zip(got, expected, strict=True))
    # Both interpreters see the same sequence of inputs from here on (a stateful model included).
    for _ in range(invokes - 1):
        details = ref.get_input_details()
        fresh = [rng.standard_normal(d["shape"]).astype(d["dtype"]) for d in details]
        pairs += list(zip(_run(interp, fresh), _run(ref, fresh), strict=True))
    worst_abs, peak = 0.0, 0.0
    for g, e in pairs:
        worst_abs = max(worst_abs, float(np.abs(g.astype(np.float64) - e).max(initial=0.0)))
        peak = max(peak, float(np.abs(e).max(initial=0.0)))
    return {
        "model": Path(path).name,
        "runtime": runtime,
        "precision": precision,
        "batch": batch or "as declared",
        "invokes_compared": invokes,
        "nodes": len(decisions),
        "delegated": sum(d["delegated"] for d in decisions),
        "partitions": len(delegate.partitions()),
        "commands_per_invoke": sum(p.kernels_per_invoke for p in prof.partitions),
        "max_abs_diff": worst_abs,
        "max_abs_reference": peak,
        "relative_to_peak": worst_abs / peak if peak else 0.0,
        "cpu_nodes": sorted({d["op_name"] for d in decisions if not d["delegated"]}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--partitioning", default="all")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--runtime", default="ai_edge_litert")
    ap.add_argument("--invokes", type=int, default=1, help="invokes compared, fresh inputs each")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for m in args.models:
        try:
            rows.append(
                check(m, args.precision, args.partitioning, args.batch, args.runtime, args.invokes)
            )
        except RuntimeError as e:  # the CPU itself cannot run it (XNNPACK, custom ops): a row
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            rows.append({"model": Path(m).name, "skipped": why[:200]})
    for r in rows:
        print(json.dumps(r))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
