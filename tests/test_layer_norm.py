"""Layer norm as converters write it (MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL, ...)
recognized into one kernel (src_cpp/ops/layer_norm.cc), with the residual ADD before it: every
form, with and without gamma / beta, fp16 storage, rows in chunks, a resized batch, and the
cases that must stay node by node. Each against stock TFLite CPU."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity, compare, random_inputs, run

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

FORMS = [("batch_norm", False), ("batch_norm", True), ("centered", False), ("centered", True)]


def kernels(r) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(k.op for k in r.delegate.profile().kernels)


def norm_model(
    shape: tuple[int, ...] = (2, 5, 24),
    form: str = "batch_norm",
    beta: bool = False,
    gamma: bool = True,
    residual: bool = False,
) -> bytes:
    b = ModelBuilder(seed=4)
    c = shape[-1]
    x = b.input("x", shape)
    if residual:
        x = b.add(x, b.input("r", shape))
    g = (1.0 + 0.2 * b.rand((c,), scale=1.0)).astype(np.float32) if gamma else None
    bt = b.rand((c,), scale=0.5) if beta else None
    b.output(b.layer_norm(x, g, bt, eps=1e-3, form=form))
    return b.build()


@pytest.mark.parametrize(("form", "beta"), FORMS, ids=[f"{f}-beta{int(b)}" for f, b in FORMS])
@pytest.mark.parametrize("residual", [False, True], ids=["x", "add"])
def test_layer_norm_is_one_kernel(form: str, beta: bool, residual: bool, runtime: str) -> None:
    model = norm_model(form=form, beta=beta, residual=residual)
    r = check_parity(model, runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["LAYER_NORM"]


@pytest.mark.parametrize("shape", [(3, 1), (4, 7), (1, 2, 3, 300), (1, 2, 1030)],
                         ids=["c1", "c7", "4d_c300", "c1030"])
def test_layer_norm_shapes(shape: tuple[int, ...], runtime: str) -> None:
    # Rows shorter and longer than a work-group.
    r = check_parity(norm_model(shape), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["LAYER_NORM"]


def test_layer_norm_without_gamma(runtime: str) -> None:
    r = check_parity(norm_model(gamma=False), runtime, expect_delegated="all", profiling=True)
    assert kernels(r) == ["LAYER_NORM"]


def test_layer_norm_of_large_offsets(runtime: str) -> None:
    # Values far from 0 with a small spread: the variance must come from the centered values,
    # as the graph computes it (a one-pass E[x^2] - E[x]^2 would lose every digit here). The
    # graph's own x * g - mean * g then cancels ~10^4 down to ~1 on the CPU as on the device:
    # ~4 digits left, whence the tolerance.
    x = (np.random.default_rng(2).standard_normal((2, 5, 24)) * 0.01 + 100).astype(np.float32)
    check_parity(norm_model(), runtime, [x], expect_delegated="all", rtol=0, atol=2e-3)


@pytest.mark.parametrize(("form", "beta"), FORMS[1:2] + FORMS[3:])
def test_layer_norm_fp16_storage(form: str, beta: bool, runtime: str) -> None:
    check_parity(
        norm_model(form=form, beta=beta, residual=True),
        runtime,
        expect_delegated="all",
        precision="fp16",
        rtol=1e-2,
        atol=1e-2,
    )


def test_layer_norm_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    r = check_parity(
        norm_model((4, 6, 24), residual=True), runtime, expect_delegated="all",
        max_alloc_bytes=512,
    )
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_layer_norm_follows_a_resized_batch(runtime: str) -> None:
    model = norm_model((1, 5, 24), residual=True)
    it = check_parity(model, runtime, expect_delegated="all").interpreter
    for batch in (3, 0, 2):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for i in (ref, it):
            for d in i.get_input_details():
                i.resize_tensor_input(d["index"], (batch, 5, 24))
            i.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), batch)
        compare(run(it, inputs), run(ref, inputs), 1e-4, None, f" (batch {batch})")


def test_intermediate_read_elsewhere_keeps_the_nodes(runtime: str) -> None:
    # The mean is also a graph output: the group's nodes run one by one.
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 3, 16))
    y = b.layer_norm(x, np.ones(16, np.float32))
    b.output(y)
    mean = next(o.outputs[0] for o in b._ops if o.code == 40)  # the first MEAN
    b.output(mean)
    r = check_parity(b.build(), runtime, expect_delegated="all", profiling=True)
    assert "LAYER_NORM" not in kernels(r) and "MEAN" in kernels(r)


def test_mean_over_another_axis_is_no_layer_norm(runtime: str) -> None:
    # The same nodes over axis 1 are no norm over the last axis: they run one by one.
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 6, 4))
    y = b.layer_norm(x, np.ones(4, np.float32))
    for o in b._ops:
        if o.code == 40:  # MEAN axes tensor: -1 -> 1
            b._tensors[o.inputs[1]].data = np.array([1], np.int32)
    for t in b._tensors:
        if t.shape == (2, 6, 1):
            t.shape = (2, 1, 4)
    b.output(y)
    r = check_parity(b.build(), runtime, profiling=True)
    assert r.delegated and "LAYER_NORM" not in kernels(r)


def test_layer_norm_unfused_without_fuse_add(runtime: str) -> None:
    r = check_parity(norm_model(residual=True), runtime, expect_delegated="all", profiling=True,
                     fuse_add=False)
    assert "LAYER_NORM" not in kernels(r) and "RSQRT" in kernels(r)
