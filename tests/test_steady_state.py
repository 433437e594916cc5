"""A steady-state invoke repeats no set-up work: no re-plan, no re-bind, no program build, no
buffer allocation; one host sync per partition; and it moves only the partitions' real
inputs and outputs. A weight leaving the device on every invoke was the root of issue #23's
17x slowdowns (tests/test_dequantize.py has the model)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from parity import random_inputs, run
from test_dequantize import converter_ordered_model
from test_graphs import alternating_model

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

SETUP = ("plans", "binds", "programs_built", "buffers_created")


def _boundary(interp: Any) -> tuple[int, int, int, int]:
    """Non-constant inputs and all outputs of the interpreter's delegate nodes (all ours: the
    reference interpreter applies no XNNPACK): counts and float32 bytes."""
    details = {t["index"]: t for t in interp.get_tensor_details()}

    def nbytes(t: int) -> int:
        return int(np.prod(details[t]["shape"])) * 4

    ins, outs = [], []
    for op in interp._get_ops_details():
        if op["op_name"] != "DELEGATE":
            continue
        ins += [t for t in op["inputs"] if t >= 0 and not _model_constant(interp, t)]
        outs += list(op["outputs"])
    return len(ins), sum(map(nbytes, ins)), len(outs), sum(map(nbytes, outs))


def _model_constant(interp: Any, t: int) -> bool:
    """Neither a graph input nor produced by a node: a weight."""
    produced = {o for op in interp._get_ops_details() for o in op["outputs"]}
    inputs = {d["index"] for d in interp.get_input_details()}
    return t not in produced and t not in inputs


def _steady(model: bytes, runtime: str, n: int, **options: Any) -> tuple[dict, Any, Any]:
    delegate = clgpu_delegate.load(partitioning="all", **options)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    x = random_inputs(interp.get_input_details(), 1)
    run(interp, x)
    run(interp, x)  # the second invoke may still bind (zero-copy: TFLite's buffers settle)
    before = delegate.stats().to_dict()
    for _ in range(n):
        run(interp, x)
    after = delegate.stats().to_dict()
    counts = [k for k, v in before.items() if type(v) is int]  # not the calibration figures
    return {k: after[k] - before[k] for k in counts}, delegate, interp


@pytest.mark.parametrize("zero_copy", ["off", "on"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_steady_state_invoke_repeats_no_setup(runtime: str, zero_copy: str, precision: str) -> None:
    n = 5
    delta, delegate, interp = _steady(
        alternating_model(), runtime, n, zero_copy=zero_copy, precision=precision
    )
    parts = len(delegate.partitions())
    assert parts == 3
    assert {k: delta[k] for k in SETUP} == dict.fromkeys(SETUP, 0), delta
    assert delta["invokes"] == n * parts
    assert delta["host_syncs"] == n * parts
    n_in, in_bytes, n_out, out_bytes = _boundary(interp)
    assert (delta["uploads"], delta["upload_bytes"]) == (n * n_in, n * in_bytes)
    assert (delta["downloads"], delta["download_bytes"]) == (n * n_out, n * out_bytes)


def test_resize_plans_once_then_steady_again(runtime: str) -> None:
    delegate = clgpu_delegate.load(partitioning="all")
    interp = make_interpreter(alternating_model(), [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    x = random_inputs(interp.get_input_details(), 2)
    run(interp, x)
    plans = delegate.stats()["plans"]
    interp.resize_tensor_input(interp.get_input_details()[0]["index"], (3, 9, 7, 3))
    interp.allocate_tensors()
    x = random_inputs(interp.get_input_details(), 3)
    run(interp, x)
    replanned = delegate.stats()["plans"]
    assert replanned == plans + 3  # each partition once, for the new shapes
    run(interp, x)
    run(interp, x)
    assert delegate.stats()["plans"] == replanned


def test_fp16_weights_never_leave_the_device(runtime: str) -> None:
    # The issue #23 structure: every fp16 weight dequantized ahead of the first conv.
    model, weights = converter_ordered_model()
    n = 3
    delta, delegate, interp = _steady(model, runtime, n, max_delegated_partitions=1)
    _, _, n_out, out_bytes = _boundary(interp)
    assert n_out == 1  # the conv's activation, no weight
    assert (delta["downloads"], delta["download_bytes"]) == (n, n * out_bytes)
    assert {k: delta[k] for k in SETUP} == dict.fromkeys(SETUP, 0)


def test_invoke_time_splits_into_enqueue_and_wait(runtime: str) -> None:
    # host_enqueue_us / host_wait_us: each invoke's host time until its last command was
    # enqueued, then until the device finished; both inside the invokes' own wall time.
    delegate = clgpu_delegate.load(partitioning="all")
    interp = make_interpreter(alternating_model(), [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    x = random_inputs(interp.get_input_details(), 4)
    run(interp, x)
    before = delegate.stats()
    t0 = time.perf_counter()
    for _ in range(5):
        run(interp, x)
    wall_us = (time.perf_counter() - t0) * 1e6
    after = delegate.stats()
    enqueue = after.host_enqueue_us - before.host_enqueue_us
    wait = after.host_wait_us - before.host_wait_us
    assert enqueue > 0 and wait >= 0
    assert enqueue + wait <= wall_us
