"""What the delegate would do with a model: delegated nodes, partitions, and why
each other node stays on the CPU (`python -m clgpu_delegate inspect MODEL`)."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _op_names() -> dict[int, str]:
    try:
        from tflite.BuiltinOperator import BuiltinOperator
    except ImportError:
        return {}
    return {v: k for k, v in vars(BuiltinOperator).items() if isinstance(v, int)}


def op_name(code: int) -> str:
    """TFLite builtin operator name for a code ("op 123" if unknown)."""
    return _op_names().get(code, f"op {code}")


def inspect_model(model: str | bytes, runtime: str | None = None, **options: Any) -> dict[str, Any]:
    """Apply a delegate to `model` and return its decisions and partitions."""
    from .delegate import load
    from .runtime import make_interpreter

    options.setdefault("partitioning", "all")
    delegate = load(**options)
    interp = make_interpreter(model, [delegate], runtime=runtime)
    report = {
        "device": delegate.device.name,
        "nodes": delegate.decisions(),
        "partitions": delegate.partitions(),
    }
    del interp
    return report


def format_report(report: dict[str, Any]) -> str:
    nodes = report["nodes"]
    n_del = sum(1 for n in nodes if n["delegated"])
    lines = [
        f"device: {report['device']}",
        f"delegated {n_del} of {len(nodes)} nodes in {len(report['partitions'])} partition(s)",
    ]
    for i, p in enumerate(report["partitions"]):
        lines.append(f"  partition {i}: nodes {p}")
    lines.append("")
    lines.append(f"{'node':>5}  {'op':<22} {'where':<6} reason / note")
    for n in nodes:
        where = "GPU" if n["delegated"] else "CPU"
        why = n["reason"] if not n["delegated"] else n.get("note", "")
        lines.append(f"{n['node']:>5}  {n['op_name']:<22} {where:<6} {why}")
    return "\n".join(lines)
