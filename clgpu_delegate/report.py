"""What the delegate would do with a model: delegated nodes, partitions, and why
each other node stays on the CPU (`clgpu-delegate inspect MODEL`)."""

from __future__ import annotations

import collections
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .results import NodeDecision
from .runtime import InputShapes


@functools.cache
def _op_names() -> dict[int, str]:
    try:  # the schema package comes with the [models] extra; without it codes stay numbers
        from tflite.BuiltinOperator import BuiltinOperator
    except ImportError:
        return {}
    return {v: k for k, v in vars(BuiltinOperator).items() if isinstance(v, int)}


def op_names() -> dict[int, str]:
    """TFLite builtin operator names by code (empty without the schema package)."""
    return dict(_op_names())


def op_name(code: int) -> str:
    """TFLite builtin operator name for a code ("op 123" if unknown)."""
    return _op_names().get(code, f"op {code}")


def delegation_summary(
    nodes: Sequence[NodeDecision], partitions: int, device_type: str | None
) -> str:
    """One line: how many nodes the delegate runs and, when not all, why the others stay on
    the CPU and what to try (shared by `inspect` and `bench`)."""
    total = len(nodes)
    done = sum(1 for n in nodes if n.delegated)
    head = f"delegated {done} of {total} nodes"
    if done:
        head += f" in {partitions} partition(s)"
    if done == total:
        return head
    left = [n for n in nodes if not n.delegated]
    cost = [n for n in left if n.reason.startswith("cost:")]
    off = [n for n in left if n.reason == "partitioning=none"]
    # A FLOAT16 / sparse weight's DEQUANTIZE / DENSIFY or a shape computation: the delegate
    # folds it only into a delegated reader, so it stays with readers the CPU runs.
    follows = [
        n
        for n in left
        if (n.reason.startswith("only a ") and "feeding" in n.reason)
        or n.reason == "its output is also read by an op that stays on the CPU"
    ]
    cannot = [n for n in left if n not in cost and n not in off and n not in follows]
    why = []
    if off:
        why.append(f"partitioning none claims nothing ({len(off)} nodes)")
    if cost:
        if device_type == "cpu":
            why.append(
                f"the cost model declines {len(cost)} on a CPU OpenCL device, where TFLite's "
                "own CPU kernels are faster"
            )
        else:
            why.append(f"the cost model estimates the CPU faster for {len(cost)}")
    if follows:
        ops = collections.Counter(n.op_name for n in follows).most_common(3)
        named = ", ".join(f"{op} x{k}" for op, k in ops)
        why.append(f"{len(follows)} weight or shape nodes stay with their CPU readers ({named})")
    if cannot:
        ops = collections.Counter(n.op_name for n in cannot).most_common(3)
        named = ", ".join(f"{op} x{k}" for op, k in ops)
        more = ", ..." if len({n.op_name for n in cannot}) > 3 else ""
        why.append(f"{len(cannot)} the delegate does not run ({named}{more})")
    hint = ""
    if cost and device_type == "cpu":
        hint = "; try --partitioning all to exercise the delegate"
    elif cost:
        hint = "; --partitioning measure times the plans instead of estimating"
    elif cannot and not done:
        hint = "; `clgpu-delegate inspect MODEL` gives each node's reason"
    return f"{head}: {'; '.join(why)}{hint}"


@dataclass(frozen=True)
class InspectReport:
    """Which nodes of a model a delegate claims, and in which partitions."""

    device: str
    nodes: tuple[NodeDecision, ...]
    partitions: tuple[tuple[int, ...], ...]
    partition_subgraphs: tuple[int, ...] = ()  # the subgraph of each partition
    device_type: str = "gpu"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "device_type": self.device_type,
            "nodes": [n.to_dict() for n in self.nodes],
            "partitions": [list(p) for p in self.partitions],
            "partition_subgraphs": list(self.partition_subgraphs),
            "summary": self.summary(),
        }

    def summary(self) -> str:
        return delegation_summary(self.nodes, len(self.partitions), self.device_type)


def inspect_model(
    model: str | bytes,
    runtime: str | None = None,
    input_shapes: InputShapes | None = None,
    threads: int | None = None,
    **options: Any,
) -> InspectReport:
    """Apply a delegate made by `load(**options)` to `model` and report its decisions and
    partitions (the same defaults as `load()`: partitioning "cost" unless set; "measure"
    reports the plan `plan()` measured fastest). With `input_shapes` (as `run_benchmark()`'s)
    the model is also prepared at those shapes, so one it cannot run at fails here. The
    interpreter runs on `threads` CPU threads (default: every core, as `run_benchmark()`):
    the cost model weighs the device against XNNPACK on them."""
    import os

    from .delegate import load
    from .runtime import allocate, make_interpreter

    if options.get("partitioning") == "measure":
        from .planning import plan

        options.pop("partitioning")
        options = dict(
            plan(
                model, runtime=runtime, input_shapes=input_shapes, threads=threads, **options
            ).options
        )
    delegate = load(**options)
    interp = make_interpreter(
        model, [delegate], runtime=runtime, num_threads=threads or os.cpu_count() or 1
    )
    if input_shapes:
        allocate(interp, input_shapes)
    dev = delegate.device
    report = InspectReport(
        device=dev.name,
        nodes=tuple(delegate.decisions()),
        partitions=tuple(tuple(p) for p in delegate.partitions()),
        partition_subgraphs=tuple(delegate.partition_subgraphs()),
        device_type=dev.type,
    )
    del interp
    return report


def format_report(report: InspectReport) -> str:
    # On a GPU the delegated nodes run "GPU"; elsewhere the OpenCL device is not one.
    on_device = "GPU" if report.device_type == "gpu" else "OpenCL"
    kind = "a GPU" if report.device_type == "gpu" else f"an OpenCL {report.device_type} device"
    nodes = report.nodes
    lines = [f"device: {report.device} ({kind})", report.summary()]
    # A model with several subgraphs (control flow, an init subgraph) names each node's.
    several = len({n.subgraph for n in nodes}) > 1
    subgraphs = report.partition_subgraphs or (0,) * len(report.partitions)
    for i, (p, s) in enumerate(zip(report.partitions, subgraphs, strict=True)):
        lines.append(f"  partition {i}: {f'subgraph {s} ' if several else ''}nodes {list(p)}")
    lines.append("")
    head = f"{'subgraph':>8}  " if several else ""
    lines.append(f"{head}{'node':>5}  {'op':<22} {'where':<6} reason / note")
    for n in nodes:
        where = on_device if n.delegated else "CPU"
        why = n.note if n.delegated else n.reason
        sub = f"{n.subgraph:>8}  " if several else ""
        lines.append(f"{sub}{n.node:>5}  {n.op_name:<22} {where:<6} {why}")
    if report.device_type != "gpu":
        lines.append(
            f"({on_device}: the delegate on the OpenCL device, itself a {report.device_type}; "
            "CPU: TFLite's own kernels)"
        )
    return "\n".join(lines)
