"""CONCATENATION parity with stock TFLite CPU: 1-5 inputs on every axis (negative too), runs
that do and do not allow float4 copies, constant inputs, batch > 1. A fused activation, which
TFLite's kernels refuse, is declined."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Concat(NamedTuple):
    shapes: tuple[tuple[int, ...], ...]
    axis: int
    const: tuple[int, ...] = ()  # indices of the inputs that are constant tensors
    activation: str | None = None  # TFLite's CPU kernels accept only None


CASES = {
    "c_2_vec4": Concat(((1, 6, 5, 8), (1, 6, 5, 4)), 3),
    "c_2_odd": Concat(((2, 5, 7, 3), (2, 5, 7, 5)), 3),
    "c_3_mixed": Concat(((1, 4, 3, 4), (1, 4, 3, 3), (1, 4, 3, 8)), 3),
    "c_5": Concat(tuple((2, 3, 4, c) for c in (1, 4, 2, 7, 4)), -1),
    "h_2": Concat(((2, 3, 5, 6), (2, 4, 5, 6)), 1),
    "w_3_neg": Concat(((1, 5, 2, 3), (1, 5, 1, 3), (1, 5, 4, 3)), -2),
    "batch_2": Concat(((1, 3, 3, 5), (3, 3, 3, 5)), 0),
    "rank2_axis1": Concat(((4, 3), (4, 9)), 1),
    "rank2_axis0": Concat(((3, 7), (5, 7), (1, 7)), -2),
    "rank1": Concat(((5,), (3,), (8,)), 0),
    "rank3_const": Concat(((2, 5, 4), (2, 5, 3)), 2, const=(1,)),
    "const_first": Concat(((1, 4, 4, 4), (1, 4, 4, 6)), 3, const=(0,)),
    "rank5": Concat(((2, 3, 1, 2, 5), (2, 3, 4, 2, 5)), 2),
    "rank6": Concat(((1, 2, 3, 2, 2, 3), (1, 2, 3, 2, 2, 1)), 5),
    "single_input": Concat(((2, 3, 4, 5),), 3),
}


def concat_model(case: Concat, seed: int = 0) -> bytes:
    b = ModelBuilder(seed=seed)
    tensors = [
        b.const(b.rand(s, scale=1.0)) if i in case.const else b.input(f"x{i}", s)
        for i, s in enumerate(case.shapes)
    ]
    b.output(b.concat(tensors, case.axis, case.activation))
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_concat_parity(case: Concat, runtime: str) -> None:
    r = check_parity(concat_model(case), runtime, expect_delegated="all", atol=0, rtol=0)
    assert r.stats["invokes"] >= 1


def test_concat_same_tensor_twice_between_convs(runtime: str) -> None:
    # conv -> concat(y, x, y) -> conv: the whole graph in one partition.
    b = ModelBuilder(seed=3)
    x = b.input("x", (2, 6, 5, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)), activation="RELU")
    z = b.concat([y, x, y], 3)
    b.output(b.conv2d(z, b.rand((5, 1, 1, 12))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_int32_concat_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    b.output(b.concat([b.input("a", (2, 3), "int32"), b.input("b", (2, 4), "int32")], 1))
    r = check_parity(b.build(), runtime, expect_cpu="all", atol=0, rtol=0)
    assert "float32" in r.reason(0)


def test_concat_profile_names_its_kernels(runtime: str) -> None:
    r = check_parity(
        concat_model(CASES["c_3_mixed"]), runtime, expect_delegated="all", profiling=True
    )
    names = {k.kernel for k in r.delegate.profile().kernels}
    assert names & {"concat_copy", "concat_copy4"}, names


def test_concat_of_constants_only(runtime: str) -> None:
    # Every input constant: the output is still computed on the device (then added to x).
    b = ModelBuilder(seed=2)
    x = b.input("x", (2, 7))
    c = b.concat([b.const(np.ones((2, 3), np.float32)), b.const(b.rand((2, 4), 1.0))], 1)
    b.output(b.add(x, c))
    check_parity(b.build(), runtime, expect_delegated="all")


@pytest.mark.parametrize("activation", ["RELU", "RELU6"])
def test_concat_with_activation_is_declined_like_the_cpu_refuses_it(
    activation: str, runtime: str
) -> None:
    model = concat_model(Concat(((1, 3, 3, 4), (1, 3, 3, 4)), 3, activation=activation))
    d = clgpu_delegate.load(partitioning="all")
    interp = make_interpreter(model, [d], runtime=runtime, reference=True)
    assert d.delegated_nodes() == []
    assert "activation" in d.decisions()[0]["reason"], d.decisions()
    with pytest.raises(RuntimeError, match="activation"):
        interp.allocate_tensors()
