"""Per-node numerical error of the delegate in fp32 and fp16 against the CPU
reference (`check_precision(model)`, `python -m clgpu_delegate bench --check-precision`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .runtime import InputShapes


@dataclass
class NodeError:
    node: int
    op: str
    tensor: int
    shape: tuple[int, ...]
    errors: dict[str, tuple[float, float]] = field(default_factory=dict)  # precision -> abs, rel
    flagged: bool = False
    # The CPU reference reused this tensor's buffer for an in-place op, so its
    # value is gone after invoke: there is nothing to compare against.
    no_reference: bool = False
    # The largest |value| the node reads or writes on the CPU reference (its output, its
    # inputs, its weights): past FP16_MAX, fp16 storage saturates it (at +-65504, sign kept).
    peak: float = 0.0

    @property
    def exceeds_fp16(self) -> bool:
        return self.peak > FP16_MAX


@dataclass
class PrecisionReport:
    precisions: tuple[str, ...]
    nodes: list[NodeError]
    outputs: dict[str, tuple[float, float]]  # final outputs: precision -> (abs, rel)
    flagged_node: int | None

    @property
    def fp16_overflow(self) -> list[int]:
        """Delegated nodes whose values exceed the fp16 range on the inputs used: in fp16
        storage their values saturate at +-65504 (sign kept), so their results are wrong."""
        return [n.node for n in self.nodes if n.exceeds_fp16]

    def table(self) -> str:
        head = f"{'node':>5} {'op':<18} {'shape':<20}"
        for p in self.precisions:
            head += f" {p + ' abs':>11} {p + ' rel':>11}"
        lines = [head]
        for n in self.nodes:
            row = f"{n.node:>5} {n.op:<18} {str(list(n.shape)):<20}"
            if n.no_reference:
                lines.append(row + "   (no CPU value: overwritten by an in-place op)")
                continue
            for p in self.precisions:
                a, r = n.errors.get(p, (float("nan"), float("nan")))
                row += f" {a:>11.2e} {r:>11.2e}"
            notes = ["<- error jumps here"] if n.flagged else []
            if n.exceeds_fp16:
                notes.append(f"<- |x| up to {n.peak:.3g}: past fp16's range")
            lines.append(row + "".join("   " + s for s in notes))
        out = ", ".join(f"{p}: abs {a:.2e} rel {r:.2e}" for p, (a, r) in self.outputs.items())
        lines.append(f"model outputs: {out}")
        return "\n".join(lines)


FP16_MAX = 65504.0


def _peak(x: npt.NDArray[Any]) -> float:
    finite = np.asarray(x, np.float64)[np.isfinite(x)] if x.dtype.kind == "f" else np.zeros(0)
    return float(np.max(np.abs(finite))) if finite.size else 0.0


def _error(ref: npt.NDArray[Any], got: npt.NDArray[Any]) -> tuple[float, float]:
    if ref.size == 0:
        return 0.0, 0.0
    diff = float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64))))
    scale = float(np.max(np.abs(ref))) or 1.0
    return diff, diff / scale


def check_precision(
    model: str | bytes,
    *,
    precisions: tuple[str, ...] = ("fp32", "fp16"),
    runtime: str | None = None,
    device: str = "auto",
    seed: int = 0,
    jump_factor: float = 10.0,
    inputs: Sequence[npt.NDArray[Any]] | None = None,
    input_shapes: InputShapes | None = None,
    **options: Any,
) -> PrecisionReport:
    """Run `model` on the CPU reference and with the delegate at each precision, and
    report each delegated node's max abs / rel error (an int8 node's in quanta: its
    integers are compared). The node flagged is the first
    whose fp16 (last precision) error is `jump_factor` times the largest error before
    it and at least 1e-3 relative. `inputs` (graph order) replaces the seeded
    ones (runtime.random_inputs). Nodes whose values exceed the fp16 range on these inputs
    are listed in `fp16_overflow` (fp16 storage saturates them). `input_shapes`: as
    `run_benchmark()`'s."""
    from .delegate import load
    from .runtime import allocate, make_interpreter, random_inputs

    if isinstance(model, str):
        with open(model, "rb") as f:
            model = f.read()
    ref = make_interpreter(model, reference=True, runtime=runtime, preserve_all_tensors=True)
    allocate(ref, input_shapes)
    details = ref.get_input_details()
    seeded = random_inputs(details, seed) if inputs is None else []
    if inputs is not None and len(inputs) != len(details):
        raise ValueError(f"the model has {len(details)} inputs, {len(inputs)} were given")
    feeds = {
        d["index"]: (
            np.asarray(inputs[i], d["dtype"]).reshape(d["shape"])
            if inputs is not None
            else seeded[i]
        )
        for i, d in enumerate(details)
    }
    for i, x in feeds.items():
        ref.set_tensor(i, x)
    ref.invoke()
    ops = {op["index"]: op for op in ref._get_ops_details()}
    # Elementwise CPU kernels may write their output over an input that has no
    # other reader; such an input's value is not preserved.
    inplace_ops = {
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "SQUARED_DIFFERENCE",
        "MAXIMUM",
        "MINIMUM",
        "RESHAPE",
        "SQUEEZE",
        "EXPAND_DIMS",
        "LOGISTIC",
        "TANH",
        "RELU",
        "RELU6",
    }
    readers: dict[int, list[dict[str, Any]]] = {}
    for op in ops.values():
        for t in op["inputs"]:
            readers.setdefault(int(t), []).append(op)
    overwritten = {
        t for t, rs in readers.items() if len(rs) == 1 and rs[0]["op_name"] in inplace_ops
    }
    out_idx = [d["index"] for d in ref.get_output_details()]
    ref_out = [ref.get_tensor(i) for i in out_idx]

    nodes: dict[int, NodeError] = {}
    outputs: dict[str, tuple[float, float]] = {}
    for prec in precisions:
        delegate = load(
            device=device, precision=prec, partitioning="all", capture_tensors=True, **options
        )
        interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
        allocate(interp, input_shapes)
        delegate.wait_ready()  # cpu_warmup: the device's activations, not the CPU's
        for i, x in feeds.items():
            interp.set_tensor(i, x)
        interp.invoke()
        got = delegate.captured()
        for dec in delegate.decisions():
            op = ops.get(dec.node)
            # A folded FLOAT16 weight's DEQUANTIZE has no captured output (a constant); an int8
            # model's DEQUANTIZE is a kernel like the others.
            if not dec.delegated or op is None:
                continue
            t = int(op["outputs"][0])
            if t not in got:
                continue
            n = nodes.setdefault(dec.node, NodeError(dec.node, dec.op_name, t, tuple(got[t].shape)))
            seen = [_peak(ref.get_tensor(x)) for x in _values(op, overwritten)]
            n.peak = max([n.peak, *seen])
            if t in overwritten:
                n.no_reference = True
                continue
            n.errors[prec] = _error(ref.get_tensor(t), got[t])
        errs = [_error(a, interp.get_tensor(i)) for a, i in zip(ref_out, out_idx, strict=True)]
        outputs[prec] = (max(e[0] for e in errs), max(e[1] for e in errs))
        del interp
        delegate.close()

    ordered = [nodes[k] for k in sorted(nodes)]
    flagged = None
    worst = 0.0
    last = precisions[-1]
    for n in ordered:
        rel = n.errors.get(last, (0.0, 0.0))[1]
        if flagged is None and rel >= 1e-3 and rel >= jump_factor * max(worst, 1e-6):
            n.flagged = True
            flagged = n.node
        worst = max(worst, rel)
    return PrecisionReport(tuple(precisions), ordered, outputs, flagged)


def _values(op: dict[str, Any], overwritten: set[int]) -> list[int]:
    """The tensors a node reads and writes whose CPU values are still there after invoke."""
    return [int(t) for t in [*op["inputs"], *op["outputs"]] if t >= 0 and int(t) not in overwritten]
