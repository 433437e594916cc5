"""Hostile models, round 3: a tensor a node writes that the model also gives data (TFLite's CPU
ignores that data; the delegate once read it as a weight), and operands whose rank TFLite's CPU
kernels refuse at prepare (the delegate must not run what the CPU refuses)."""

from __future__ import annotations

import numpy as np
import pytest
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


def _refused_by_the_cpu(kind: str) -> bytes:
    """A DEPTHWISE_CONV_2D bias of rank 2, or a SPLIT_V size_splits of shape [2, 1] (CONV_2D's
    CPU kernel checks only its bias' element count)."""
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 6, 6, 4))
    if kind == "split_v":
        a, c = b.split_v(x, [1, 3], axis=3)
        b.output(a)
        b.output(c)
    else:
        b.output(b.depthwise_conv2d(x, b.rand((1, 3, 3, 4), scale=0.5), b.rand((4,))))
    operand = b._ops[-1].inputs[1 if kind == "split_v" else 2]
    t = b._check(operand)
    t.shape = (t.shape[0], 1)
    t.data = t.data.reshape(t.shape)
    return b.build()


@pytest.mark.parametrize("kind", ["depthwise", "split_v"])
def test_what_the_cpu_refuses_does_not_run(kind: str, runtime: str) -> None:
    model = _refused_by_the_cpu(kind)
    with pytest.raises((RuntimeError, ValueError)):
        make_interpreter(model, runtime=runtime, reference=True).allocate_tensors()
    d = clgpu_delegate.load(partitioning="all")
    with pytest.raises((RuntimeError, ValueError)):
        make_interpreter(model, [d], runtime=runtime, reference=True).allocate_tensors()
    assert not d.delegated_nodes()


def test_cpu_kernel_that_may_overrun_keeps_the_model_on_the_cpu(runtime: str, capfd) -> None:
    """A CONV_2D of stride 65537 (TFLite 2.14's kernel writes past its arena): the delegate
    claims nothing, so TFLite's arena is what the CPU alone has, and says why once."""
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 5, 5, 3))
    y = b.add(x, b.rand((1, 5, 5, 3)))
    y = b.conv2d(y, b.rand((4, 1, 1, 3)), b.rand((4,)), stride=65537, padding="VALID")
    b.output(b.add(y, b.rand((4,))))
    model = b.build()
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, runtime=runtime, reference=True)
    try:
        ref.allocate_tensors()
    except RuntimeError as e:  # LiteRT checks the stride against INT16_MAX itself
        assert "stride" in str(e)
        with pytest.raises(RuntimeError, match="stride"):
            it.allocate_tensors()
        assert not d.delegated_nodes()
        return
    inputs = random_inputs(ref.get_input_details())
    want = run(ref, inputs)
    it.allocate_tensors()
    got = run(it, inputs)
    assert not d.delegated_nodes()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert capfd.readouterr().err.count("claims nothing in this model") == 1
