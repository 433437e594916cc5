"""Parity of quantized (int8 / uint8) models: stock TFLite CPU kernels vs the delegate, compared
in quanta. An int8 output is compared as integers; a float output that a DEQUANTIZE produces is
turned back into its integers with that DEQUANTIZE's scale. The delegate aims at bit-exact
results: the acceptance is >= 99.9 % bit-exact elements and none more than one quantum off.

    r = check_int8_parity(model, runtime)   # asserts; r.exact / r.elements, r.max_quanta
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from parity import compare, format_decisions, run

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

# Per case: elements further than this from the CPU fail the test.
MAX_QUANTA = 1


@dataclass
class QuantStats:
    """Elements compared, those bit-exact, and the largest difference in quanta."""

    elements: int = 0
    exact: int = 0
    max_quanta: int = 0

    def add(self, other: QuantStats) -> None:
        self.elements += other.elements
        self.exact += other.exact
        self.max_quanta = max(self.max_quanta, other.max_quanta)

    @property
    def fraction(self) -> float:
        return self.exact / self.elements if self.elements else 1.0

    def __str__(self) -> str:
        return (
            f"{self.exact}/{self.elements} bit-exact ({100 * self.fraction:.3f} %), "
            f"max {self.max_quanta} quanta"
        )


@dataclass
class Int8Result:
    stats: QuantStats
    delegate: Any
    decisions: list[dict[str, Any]]
    partitions: list[list[int]]
    outputs: list[np.ndarray]
    reference: list[np.ndarray]


def quantized_inputs(details: Sequence[dict[str, Any]], seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs: the full integer range for quantized inputs, N(0, 1) for float ones."""
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, size=shape).astype(dt))
    return out


def _output_quant(interp: Any) -> list[tuple[float, int] | None]:
    """Per output: its own (scale, zero point) when quantized, the (scale, zero point) of the
    DEQUANTIZE producing it when float, else None."""
    tensors = {d["index"]: d for d in interp.get_tensor_details()}
    producer = {}
    for op in interp._get_ops_details():
        for t in op["outputs"]:
            producer[int(t)] = op
    out: list[tuple[float, int] | None] = []
    for d in interp.get_output_details():
        scale, zp = d["quantization"]
        if scale:
            out.append((float(scale), int(zp)))
            continue
        op = producer.get(d["index"])
        if op is not None and op["op_name"] == "DEQUANTIZE":
            s, z = tensors[int(op["inputs"][0])]["quantization"]
            out.append((float(s), int(z)) if s else None)
        else:
            out.append(None)
    return out


def compare_quantized(
    outputs: Sequence[np.ndarray],
    reference: Sequence[np.ndarray],
    quant: Sequence[tuple[float, int] | None],
    context: str = "",
) -> QuantStats:
    """Counts bit-exact elements and the largest difference in quanta; float outputs without
    quantization are compared with the fp32 tolerances of tests/parity.py."""
    stats = QuantStats()
    for i, (got, ref, q) in enumerate(zip(outputs, reference, quant, strict=True)):
        assert got.shape == ref.shape, f"output {i}: shape {got.shape} vs {ref.shape}{context}"
        if q is None:
            compare([got], [ref], 1e-4, None, context)
            continue
        if got.dtype.kind == "f":
            # (q - zero point) * scale, back to q: exact for |q| < 2^24.
            got = np.round(got.astype(np.float64) / q[0])
            ref = np.round(ref.astype(np.float64) / q[0])
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64))
        stats.elements += int(diff.size)
        stats.exact += int((diff == 0).sum())
        stats.max_quanta = max(stats.max_quanta, int(diff.max(initial=0)))
    return stats


def check_int8_parity(
    model: bytes,
    runtime: str,
    inputs: Sequence[np.ndarray] | None = None,
    expect_delegated: Any = "all",
    expect_partitions: int | None = None,
    seed: int = 0,
    max_quanta: int = MAX_QUANTA,
    min_fraction: float = 0.999,
    **delegate_options: Any,
) -> Int8Result:
    """Runs `model` on the CPU reference and with the delegate; asserts no element is more than
    `max_quanta` off and at least `min_fraction` are bit-exact (or at most one element is not).
    expect_delegated: "all", None, or a set of op names / node indices (tests/parity.py)."""
    ref_interp = make_interpreter(model, None, runtime=runtime, reference=True)
    ref_interp.allocate_tensors()
    if inputs is None:
        inputs = quantized_inputs(ref_interp.get_input_details(), seed)
    reference = run(ref_interp, inputs)
    delegate = clgpu_delegate.load(**delegate_options)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    outputs = run(interp, inputs)
    decisions, partitions = delegate.decisions(), delegate.partitions()
    context = (
        f"\n[{runtime}, options {delegate_options}] partitions {partitions}, decisions:\n"
        f"{format_decisions(decisions)}"
    )
    stats = compare_quantized(outputs, reference, _output_quant(ref_interp), context)
    if expect_delegated == "all":
        cpu = [d for d in decisions if not d["delegated"]]
        assert not cpu, f"expected every node delegated{context}"
    elif expect_delegated is not None:
        want = set(expect_delegated)
        key = "op_name" if all(isinstance(e, str) for e in want) else "node"
        got = {d[key] for d in decisions if d["delegated"]}
        assert got == want, f"expected {sorted(want)} delegated, got {sorted(got)}{context}"
    if expect_partitions is not None:
        assert len(partitions) == expect_partitions, (
            f"expected {expect_partitions} partitions{context}"
        )
    assert stats.max_quanta <= max_quanta, f"{stats}{context}"
    assert stats.fraction >= min_fraction or stats.elements - stats.exact <= 1, f"{stats}{context}"
    return Int8Result(stats, delegate, decisions, partitions, outputs, reference)
