"""Hostile models, round 3: a tensor a node writes that the model also gives data (TFLite's CPU
ignores that data; the delegate once read it as a weight), and operands whose rank TFLite's CPU
kernels refuse at prepare (the delegate must not run what the CPU refuses)."""

from __future__ import annotations

import numpy as np
from parity import FP32_RTOL, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def _written_with_data() -> bytes:
    """conv -> y (y also given data) -> ADD(y, x2) and a conv reading y as its input."""
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), padding="SAME")
    b._check(y).data = np.full((1, 6, 6, 4), 1000.0, np.float32)  # the planted data
    z = b.add(y, b.rand((1, 6, 6, 4)))
    b.output(b.conv2d(z, b.rand((2, 1, 1, 4)), b.rand((2,))))
    return b.build()


def test_written_tensor_with_data_is_no_constant(runtime: str) -> None:
    model = _written_with_data()
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details())
    want = run(ref, inputs)
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert len(d.delegated_nodes()) == 3
