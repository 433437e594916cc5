"""What a fold test reads off a delegate's profile: kernels per invoke, and the nodes whose
kernels carry a fold (`+EXPAND`, `+DEPTHWISE`, ...) in their algorithm; and the cost model's
count of a model's kernels beside the launches."""

from __future__ import annotations

import re
from typing import Any


def launches(r: Any) -> int:
    """Kernels one invoke launched, over every partition (r: a parity result, with .delegate)."""
    return sum(p.kernels_per_invoke for p in r.delegate.profile().partitions)


def folded_nodes(r: Any, tag: str) -> int:
    """Nodes whose kernels ran with `tag` in their algorithm."""
    return len({k.node for k in r.delegate.profile().kernels if tag in k.algorithm})


def estimated_and_launched(model: bytes, runtime: str) -> tuple[list[int], int]:
    """The kernel counts of the cost model's estimates (decisions with `partitioning="cost"`,
    first partition first) and the kernels one invoke of the model launches with `all`."""
    from parity import check_parity

    r = check_parity(model, runtime, partitioning="cost", profiling=True)
    texts = " ".join(d.reason + " " + d.note for d in r.delegate.decisions())
    counts = [int(n) for n in re.findall(r"\((\d+) kernels\)", texts)]
    a = check_parity(model, runtime, partitioning="all", profiling=True, expect_delegated="all")
    return counts, launches(a)


def assert_prepare_refuses(model: bytes, runtime: str, message: str) -> None:
    """The delegate (`partitioning="cost"`, which estimates every candidate partition and counts
    its folds whatever the device) refuses the model at prepare with an error matching
    `message`: a bad research knob set in the environment."""
    import pytest

    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(partitioning="cost", cpu_warmup=False)
    with pytest.raises(RuntimeError, match=message):
        make_interpreter(model, [d], runtime=runtime).allocate_tensors()


def op_nodes(r: Any, op: str) -> int:
    """Nodes of `op` that ran a kernel of their own."""
    return len({k.node for k in r.delegate.profile().kernels if k.op == op})


def pass_on_and_off(
    model: bytes, runtime: str, others: str, op: str, tag: str, folded: int, **options: Any
) -> Any:
    """Parity with a fold pass on and off (`others`: option `fuse` naming every other pass); on,
    `folded` nodes of `op` ran no kernel of their own and the invoke launched as many kernels
    fewer; off, no kernel carried `tag`. Returns the parity result with the pass on."""
    from parity import check_parity, precision_tolerances

    precision = options.pop("precision", "fp32")
    common: dict[str, Any] = {"profiling": True, "expect_delegated": "all", "precision": precision}
    common.update(precision_tolerances(precision))
    common.update(options)
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, fuse=others, **common)
    assert op_nodes(off, op) - op_nodes(on, op) == folded, on.delegate.profile().table()
    assert launches(on) == launches(off) - folded
    assert folded_nodes(off, tag) == 0
    return on
