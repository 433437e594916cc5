"""The one parity helper of the delegate tests: run a model on stock TFLite CPU kernels and
with the delegate, compare every output, and check which nodes the delegate claimed.

    check_parity(model_bytes, runtime, expect_delegated="all")

The reference interpreter uses the runtime's builtin kernels without default delegates
(tflite-runtime 2.14's XNNPACK miscomputes some SAME-padded strided convs); so does the
delegated interpreter for the nodes it leaves on the CPU, so a mismatch is ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tflite

import clgpu_delegate
from clgpu_delegate import _core
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# Every value of the conv_algorithm option: "auto" (the selector) and each forced algorithm,
# from the delegate's own table.
CONV_ALGORITHMS = ["auto", *_core.conv_algorithms()]


# An op the delegate does not claim, where a test needs the CPU between partitions: CUMSUM along
# the batch axis (the identity at batch 1, and any shape a resize gives). SIN was, until the
# delegate claimed it. One place to change should the delegate ever claim this one.
CPU_OP = "CUMSUM"


def cpu_op(b: ModelBuilder, x: int) -> int:
    """CPU_OP of x: the same shape and type."""
    axis = b._const(np.array(0, np.int32), "axis")
    return b._op(
        tflite.BuiltinOperator.CUMSUM,
        [x, axis],
        [b.shape(x)],
        options="CumsumOptions",
        out_dtype=b.dtype(x),
    )[0]


# Relative error we accept in fp32; atol scales with the largest reference value.
FP32_RTOL = 1e-4
FP32_ATOL_FRACTION = 1e-5


def precision_tolerances(precision: str) -> dict[str, float]:
    """check_parity's rtol / atol for a fold compared at this precision: fp32's, or for fp16 the
    storage's relative step at the scale of the outputs (tests/test_fp16.py)."""
    return {"rtol": FP32_RTOL} if precision == "fp32" else {"rtol": 2e-2, "atol": 2e-2}


@dataclass
class ParityResult:
    outputs: list[np.ndarray]
    reference: list[np.ndarray]
    inputs: list[np.ndarray]
    delegate: Any
    interpreter: Any
    decisions: list[dict[str, Any]]
    partitions: list[list[int]]
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def delegated(self) -> set[int]:
        return {d["node"] for d in self.decisions if d["delegated"]}

    def reason(self, node: int) -> str:
        return next(d["reason"] for d in self.decisions if d["node"] == node)


def random_inputs(details: Sequence[dict[str, Any]], seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs for an interpreter's input details: N(0, 1) floats, small ints."""
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        if np.dtype(d["dtype"]).kind == "f":
            out.append(rng.standard_normal(shape).astype(d["dtype"]))
        else:
            out.append(rng.integers(-4, 5, size=shape).astype(d["dtype"]))
    return out


def run(interpreter: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Sets the inputs (graph order), invokes, returns copies of the outputs (graph order)."""
    for d, x in zip(interpreter.get_input_details(), inputs, strict=True):
        interpreter.set_tensor(d["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def format_decisions(decisions: Iterable[dict[str, Any]]) -> str:
    return "\n".join(
        f"  node {d['node']:>3} {d['op_name']:<20} "
        f"{'GPU' if d['delegated'] else 'CPU  ' + d['reason']}"
        for d in decisions
    )


def compare(
    outputs: Sequence[np.ndarray],
    reference: Sequence[np.ndarray],
    rtol: float,
    atol: float | None,
    context: str = "",
) -> None:
    """Asserts every output matches its reference; reports the worst abs/rel error."""
    assert len(outputs) == len(reference), f"{len(outputs)} outputs vs {len(reference)}{context}"
    for i, (got, ref) in enumerate(zip(outputs, reference, strict=True)):
        got, ref = np.asarray(got), np.asarray(ref)
        assert got.shape == ref.shape, f"output {i}: shape {got.shape} vs {ref.shape}{context}"
        assert got.dtype == ref.dtype, f"output {i}: dtype {got.dtype} vs {ref.dtype}{context}"
        if ref.size == 0:
            continue
        assert np.isfinite(ref).all(), f"output {i}: the reference is not finite{context}"
        peak = float(np.abs(ref).max())
        tol_abs = FP32_ATOL_FRACTION * max(peak, 1.0) if atol is None else atol
        # atleast_1d: a 0-d output has no index to report the worst element at.
        got, ref = np.atleast_1d(got), np.atleast_1d(ref)
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        err[np.isnan(err)] = np.inf  # NaN in `got` is the worst error there is
        limit = tol_abs + rtol * np.abs(ref.astype(np.float64))
        if not (err <= limit).all():
            worst = np.unravel_index(np.argmax(err - limit), err.shape)
            rel = err / np.maximum(np.abs(ref), 1e-30)
            bad = int((err > limit).sum())
            raise AssertionError(
                f"output {i} {ref.shape}: {bad} of {ref.size} elements differ; worst abs error "
                f"{err.max():.3g}, worst rel error {rel.max():.3g} "
                f"(rtol {rtol:g}, atol {tol_abs:.3g}, |ref| max {peak:.3g}); at {worst}: "
                f"got {got[worst]!r}, expected {ref[worst]!r}{context}"
            )


def _check_claims(
    decisions: list[dict[str, Any]], expect: Any, delegated: bool, context: str
) -> None:
    want = "delegated" if delegated else "left on the CPU"
    got_nodes = {d["node"] for d in decisions if d["delegated"] == delegated}
    if expect == "all":
        nodes = {d["node"] for d in decisions}
        assert got_nodes == nodes, f"expected every node {want}{context}"
        return
    expect = set(expect)
    if all(isinstance(e, str) for e in expect):
        got_ops = {d["op_name"] for d in decisions if d["delegated"] == delegated}
        every = all(d["delegated"] == delegated for d in decisions if d["op_name"] in expect)
        assert got_ops == expect and every, (
            f"expected exactly the ops {sorted(expect)} {want}, got {sorted(got_ops)}{context}"
        )
    else:
        assert got_nodes == expect, (
            f"expected nodes {sorted(expect)} {want}, got {sorted(got_nodes)}{context}"
        )


def check_parity(
    model: bytes,
    runtime: str,
    inputs: Sequence[np.ndarray] | None = None,
    rtol: float = FP32_RTOL,
    atol: float | None = None,
    expect_delegated: Any = None,
    expect_cpu: Any = None,
    expect_partitions: int | None = None,
    seed: int = 0,
    **delegate_options: Any,
) -> ParityResult:
    """Runs `model` on the CPU reference and with `clgpu_delegate.load(**delegate_options)`.

    expect_delegated / expect_cpu: None (not checked), "all", a set of node indices (exactly
    those), or a set of op names (exactly those ops, every node of them). expect_partitions:
    the number of delegated partitions. atol defaults to 1e-5 x max(1, max |reference|).
    """
    ref_interp = make_interpreter(model, None, runtime=runtime, reference=True)
    ref_interp.allocate_tensors()
    if inputs is None:
        inputs = random_inputs(ref_interp.get_input_details(), seed)
    reference = run(ref_interp, inputs)

    delegate = clgpu_delegate.load(**delegate_options)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    outputs = run(interp, inputs)
    decisions = delegate.decisions()
    partitions = delegate.partitions()
    context = (
        f"\n[{runtime}, options {delegate_options}] partitions {partitions}, decisions:\n"
        f"{format_decisions(decisions)}"
    )

    compare(outputs, reference, rtol, atol, context)
    if expect_delegated is not None:
        _check_claims(decisions, expect_delegated, True, context)
    if expect_cpu is not None:
        _check_claims(decisions, expect_cpu, False, context)
    if expect_partitions is not None:
        assert len(partitions) == expect_partitions, (
            f"expected {expect_partitions} partitions{context}"
        )
    if any(d["delegated"] for d in decisions):
        assert delegate.stats()["invokes"] >= 1, f"no delegated kernel ran{context}"
    return ParityResult(
        outputs, reference, list(inputs), delegate, interp, decisions, partitions, delegate.stats()
    )
