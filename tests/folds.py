"""What a fold test reads off a delegate's profile: kernels per invoke, and the nodes whose
kernels carry a fold (`+EXPAND`, `+DEPTHWISE`, ...) in their algorithm."""

from __future__ import annotations

from typing import Any


def launches(r: Any) -> int:
    """Kernels one invoke launched, over every partition (r: a parity result, with .delegate)."""
    return sum(p.kernels_per_invoke for p in r.delegate.profile().partitions)


def folded_nodes(r: Any, tag: str) -> int:
    """Nodes whose kernels ran with `tag` in their algorithm."""
    return len({k.node for k in r.delegate.profile().kernels if tag in k.algorithm})
