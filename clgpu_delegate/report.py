"""What the delegate would do with a model: delegated nodes, partitions, and why
each other node stays on the CPU (`python -m clgpu_delegate inspect MODEL`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .results import NodeDecision


@functools.cache
def _op_names() -> dict[int, str]:
    try:  # the schema package comes with the [models] extra; without it codes stay numbers
        from tflite.BuiltinOperator import BuiltinOperator
    except ImportError:
        return {}
    return {v: k for k, v in vars(BuiltinOperator).items() if isinstance(v, int)}


def op_name(code: int) -> str:
    """TFLite builtin operator name for a code ("op 123" if unknown)."""
    return _op_names().get(code, f"op {code}")


@dataclass(frozen=True)
class InspectReport:
    """Which nodes of a model a delegate claims, and in which partitions."""

    device: str
    nodes: tuple[NodeDecision, ...]
    partitions: tuple[tuple[int, ...], ...]
    partition_subgraphs: tuple[int, ...] = ()  # the subgraph of each partition

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "nodes": [n.to_dict() for n in self.nodes],
            "partitions": [list(p) for p in self.partitions],
            "partition_subgraphs": list(self.partition_subgraphs),
        }


def inspect_model(model: str | bytes, runtime: str | None = None, **options: Any) -> InspectReport:
    """Apply a delegate to `model` and report its decisions and partitions."""
    from .delegate import load
    from .runtime import make_interpreter

    options.setdefault("partitioning", "all")
    delegate = load(**options)
    interp = make_interpreter(model, [delegate], runtime=runtime)
    report = InspectReport(
        device=delegate.device.name,
        nodes=tuple(delegate.decisions()),
        partitions=tuple(tuple(p) for p in delegate.partitions()),
        partition_subgraphs=tuple(delegate.partition_subgraphs()),
    )
    del interp
    return report


def format_report(report: InspectReport) -> str:
    nodes = report.nodes
    n_del = sum(1 for n in nodes if n.delegated)
    lines = [
        f"device: {report.device}",
        f"delegated {n_del} of {len(nodes)} nodes in {len(report.partitions)} partition(s)",
    ]
    # A model with several subgraphs (control flow, an init subgraph) names each node's.
    several = len({n.subgraph for n in nodes}) > 1
    subgraphs = report.partition_subgraphs or (0,) * len(report.partitions)
    for i, (p, s) in enumerate(zip(report.partitions, subgraphs, strict=True)):
        lines.append(f"  partition {i}: {f'subgraph {s} ' if several else ''}nodes {list(p)}")
    lines.append("")
    head = f"{'subgraph':>8}  " if several else ""
    lines.append(f"{head}{'node':>5}  {'op':<22} {'where':<6} reason / note")
    for n in nodes:
        where = "GPU" if n.delegated else "CPU"
        why = n.note if n.delegated else n.reason
        sub = f"{n.subgraph:>8}  " if several else ""
        lines.append(f"{sub}{n.node:>5}  {n.op_name:<22} {where:<6} {why}")
    return "\n".join(lines)
