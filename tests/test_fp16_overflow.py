"""Values past the fp16 range under precision="fp16": a finite value is stored as +-65504 (its
sign kept: conv, FC, depthwise and ADD gave -Inf whatever the sign, RESIZE_BILINEAR NaN, from an
Inf times zero), and check_precision() names the nodes whose values leave the range on the
inputs it is given. (Keeping such nodes in fp32 under precision="auto" needs a per-value storage
type in the partition runtime; not done here.)"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

F16_MAX = 65504.0
# Past the range both ways, and inside it.
X = np.array([1e5, -1e5, 7e4, -7e4, 1.0, -1.0, 6e4, -6e4], np.float32).reshape(1, 1, 2, 4)
EYE = np.eye(4, dtype=np.float32)

OPS: dict[str, Callable[[ModelBuilder, int], int]] = {
    "CONV_2D": lambda b, x: b.conv2d(x, EYE.reshape(4, 1, 1, 4), np.zeros(4, np.float32)),
    "CONV_2D_3x3": lambda b, x: b.conv2d(
        x, np.pad(EYE.reshape(4, 1, 1, 4), [(0, 0), (1, 1), (1, 1), (0, 0)])
    ),
    "DEPTHWISE_CONV_2D": lambda b, x: b.depthwise_conv2d(x, np.ones((1, 1, 1, 4), np.float32)),
    "FULLY_CONNECTED": lambda b, x: b.fully_connected(b.reshape(x, (2, 4)), EYE),
    "ADD": lambda b, x: b.add(x, np.ones(4, np.float32)),
    "RESIZE_BILINEAR": lambda b, x: b.resize_bilinear(x, (3, 5)),
    "AVERAGE_POOL_2D": lambda b, x: b.avg_pool2d(x, 1, 1),
    "SOFTMAX": lambda b, x: b.softmax(x),
    "CONCATENATION": lambda b, x: b.concat([x, x], 3),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_saturated_fp16_values_keep_their_sign(op: str, runtime: str) -> None:
    b = ModelBuilder(seed=1)
    b.output(OPS[op](b, b.input("x", X.shape)))
    model = b.build()
    outs = []
    delegate = clgpu_delegate.load(precision="fp16")
    for delegates in (None, [delegate]):
        it = make_interpreter(model, delegates, runtime=runtime, reference=True)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], X)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).ravel())
    assert all(d["delegated"] for d in delegate.decisions()), delegate.decisions()
    ref, got = outs
    assert not np.isnan(got).any(), got
    if op == "SOFTMAX":
        return  # its result is in range (and wrong: the inputs were saturated), but not NaN
    big = np.abs(ref) > F16_MAX
    assert big.any()
    np.testing.assert_array_equal(np.sign(got[big]), np.sign(ref[big]))
    small = np.abs(ref) <= 1.0
    np.testing.assert_allclose(got[small], ref[small], rtol=1e-2, atol=1e-2)


def _scaled_model() -> bytes:
    """conv -> MUL by 1e5 -> conv: the MUL and the second conv leave fp16's range on N(0, 1)
    inputs, the first conv does not."""
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), np.zeros(4, np.float32))
    y = b.mul(y, np.full(4, 1e5, np.float32))
    b.output(b.conv2d(y, b.rand((2, 1, 1, 4)), b.rand((2,))))
    return b.build()


def test_check_precision_names_the_nodes_past_the_fp16_range() -> None:
    report = clgpu_delegate.check_precision(_scaled_model())
    assert report.fp16_overflow == [1, 2], report.table()
    assert "past fp16's range" in report.table()
    # On inputs small enough, nothing leaves the range.
    quiet = clgpu_delegate.check_precision(
        _scaled_model(), inputs=[np.full((1, 6, 6, 3), 1e-4, np.float32)]
    )
    assert quiet.fp16_overflow == [], quiet.table()


def test_check_precision_refuses_inputs_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="1 inputs, 2 were given"):
        clgpu_delegate.check_precision(_scaled_model(), inputs=[X, X])
