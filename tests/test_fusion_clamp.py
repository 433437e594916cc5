"""Clamp activations (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1) folded into the op producing their
input (fusion/attach.h, AttachClamp): the producer clamps with both bounds and the activation runs
no kernel. Every case matches stock TFLite CPU with fusion on and off (option fuse_add) and the
profile shows the launches saved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tflite
from folds import launches as _launches
from parity import CPU_OP, ParityResult, check_parity, cpu_op

from clgpu_delegate.modelgen import ModelBuilder

CLAMPS = ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"]


def _nodes_run(r: ParityResult) -> set[int]:
    return {k.node for k in r.delegate.profile().kernels}


def check_folds(model: bytes, runtime: str, folded: int, **options: Any) -> ParityResult:
    """Parity with fusion on and off, every node delegated; on, exactly `folded` nodes ran no
    kernel of their own and the invoke launched that many fewer."""
    common = {"expect_delegated": "all", "profiling": True, **options}
    on = check_parity(model, runtime, **common)
    off = check_parity(model, runtime, **common, fuse_add=False)
    assert len(_nodes_run(off) - _nodes_run(on)) == folded, on.delegate.profile().table()
    assert _launches(on) == _launches(off) - folded
    return on


def clamp(b: ModelBuilder, name: str, x: int) -> int:
    code = getattr(tflite.BuiltinOperator, name)
    return b._op(code, [x], [b.shape(x)])[0]


PRODUCERS: dict[str, Callable[[ModelBuilder, int, str | None], int]] = {
    "conv": lambda b, x, act: b.conv2d(x, b.rand((5, 3, 3, 4)), activation=act),
    "depthwise": lambda b, x, act: b.depthwise_conv2d(x, b.rand((1, 3, 3, 4)), activation=act),
    "fully_connected": lambda b, x, act: b.fully_connected(
        x, b.rand((6, 4)), activation=act, keep_num_dims=True
    ),
    "mul": lambda b, x, act: b.mul(x, b.rand((4,), 1.5), act),
    "avg_pool": lambda b, x, act: b.avg_pool2d(x, 2, 2, activation=act),
}


@pytest.mark.parametrize("name", CLAMPS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_clamp_folds_into_its_producer(producer: str, name: str, runtime: str) -> None:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 7, 6, 4))
    b.output(clamp(b, name, PRODUCERS[producer](b, b.mul(x, x), None)))
    check_folds(b.build(), runtime, folded=1)


@pytest.mark.parametrize(("own", "name"), [("RELU6", "RELU_N1_TO_1"), ("RELU_N1_TO_1", "RELU")])
def test_clamp_over_a_fused_activation_takes_both_bounds(own: str, name: str, runtime: str) -> None:
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 6, 4))
    b.output(clamp(b, name, PRODUCERS["conv"](b, x, own)))
    check_folds(b.build(), runtime, folded=1)


def test_clamp_after_a_residual_add_folds_both(runtime: str) -> None:
    # conv -> ADD -> RELU: the RELU folds into the ADD and the ADD into the conv.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 8, 8, 6))
    y = b.add(b.conv2d(x, b.rand((6, 1, 1, 6))), x)
    b.output(clamp(b, "RELU", y))
    r = check_folds(b.build(), runtime, folded=2)
    assert any(k.algorithm.endswith("+ADD") for k in r.delegate.profile().kernels)


def test_clamp_stays_when_its_input_is_read_elsewhere(runtime: str) -> None:
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)))
    b.output(clamp(b, "RELU6", y))
    b.output(b.add(y, x))  # a second reader of the conv's output
    check_folds(b.build(), runtime, folded=0)


def test_clamp_stays_when_its_input_is_a_graph_output(runtime: str) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)))
    b.output(y)
    b.output(clamp(b, "RELU", y))
    check_folds(b.build(), runtime, folded=0)


def test_clamp_after_a_cpu_op_runs_alone(runtime: str) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 6, 5, 4))
    b.output(clamp(b, "RELU", cpu_op(b, b.conv2d(x, b.rand((4, 3, 3, 4))))))
    check_parity(b.build(), runtime, expect_cpu={CPU_OP}, expect_partitions=2)


def test_folded_clamp_in_chunks_and_fp16(runtime: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 16, 16, 8))
    b.output(clamp(b, "RELU6", b.conv2d(x, b.rand((8, 3, 3, 8)))))
    r = check_parity(
        b.build(), runtime, expect_delegated="all", profiling=True, max_alloc_bytes=4096
    )
    assert r.delegate.memory()["chunked_ops"] >= 1
    assert 1 not in _nodes_run(r)
    check_folds(b.build(), runtime, folded=1, precision="fp16", rtol=1e-2, atol=5e-2)
