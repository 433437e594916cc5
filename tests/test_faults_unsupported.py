"""Unsupported variants of supported ops (activations, runtime weights, dtypes, ranks, an fp16
weight also read by a CPU op) stay on the CPU, with the reason said, and the model still matches
stock TFLite."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from parity import check_parity, cpu_op, random_inputs

from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def _unsupported() -> dict[str, tuple[bytes, set[int], str]]:
    """name -> (model, nodes that must stay on the CPU, a word of the reason)."""
    out = {}

    def model(build: Callable[[ModelBuilder], None], cpu: set[int], why: str, name: str) -> None:
        b = ModelBuilder(seed=9)
        build(b)
        out[name] = (b.build(), cpu, why)

    def add_act(b: ModelBuilder) -> None:
        x = b.input("x", (2, 5))
        b.output(b.add(x, b.rand((5,)), "TANH"))

    def conv_runtime_filter(b: ModelBuilder) -> None:
        x = b.input("x", (1, 6, 6, 3))
        f = b.input("f", (4, 3, 3, 3))
        b.output(b.conv2d(x, f))

    def conv_runtime_bias(b: ModelBuilder) -> None:
        x = b.input("x", (1, 6, 6, 3))
        bias = b.input("bias", (4,))
        b.output(b.conv2d(x, b.rand((4, 3, 3, 3)), bias))

    def dw_runtime_filter(b: ModelBuilder) -> None:
        x = b.input("x", (1, 6, 6, 3))
        f = b.input("f", (1, 3, 3, 3))
        b.output(b.depthwise_conv2d(x, f))

    def transpose_runtime_perm(b: ModelBuilder) -> None:
        import tflite

        x = b.input("x", (2, 3, 4))
        perm = b.input("perm", (3,), dtype="int32")
        y = b._op(
            tflite.BuiltinOperator.TRANSPOSE, [x, perm], [(4, 3, 2)], options="TransposeOptions"
        )[0]
        b.output(y)

    def add_int32(b: ModelBuilder) -> None:
        x = b.input("x", (2, 3), dtype="int32")
        b.output(b.add(x, np.arange(3, dtype=np.int32)))

    def transpose_int32(b: ModelBuilder) -> None:
        x = b.input("x", (2, 3), dtype="int32")
        b.output(b.transpose(x, (1, 0)))

    def add_rank7(b: ModelBuilder) -> None:
        x = b.input("x", (1, 2, 1, 2, 1, 2, 3))
        b.output(b.add(x, b.input("y", (1, 2, 1, 2, 1, 2, 3))))

    def fp16_weight_also_read_on_cpu(b: ModelBuilder) -> None:
        x = b.input("x", (1, 4, 4, 3))
        # 0, 1: DEQUANTIZE of the filter and of the (zero) bias, 2: CONV_2D
        y = b.conv2d(x, b.rand((3, 1, 1, 3)), fp16_weights=True)
        w = b._weights(b.rand((3,)), 1, True, "w")  # 3: DEQUANTIZE read by ADD and CUMSUM
        b.output(b.add(b.add(y, w), cpu_op(b, w)))  # 4 ADD (GPU), 5 CUMSUM (CPU), 6 ADD

    model(add_act, {0}, "activation", "add_tanh")
    model(conv_runtime_filter, {0}, "constant", "conv2d_runtime_filter")
    model(conv_runtime_bias, {0}, "constant", "conv2d_runtime_bias")
    model(dw_runtime_filter, {0}, "constant", "depthwise_runtime_filter")
    model(transpose_runtime_perm, {0}, "constant", "transpose_runtime_perm")
    model(add_int32, {0}, "float32", "add_int32")
    model(transpose_int32, {0}, "float32", "transpose_int32")
    model(add_rank7, {0}, "rank", "add_rank7")
    model(fp16_weight_also_read_on_cpu, {3, 5}, "", "fp16_weight_shared_with_cpu_op")
    return out


UNSUPPORTED = _unsupported()


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_variant_stays_on_the_cpu(name: str, runtime: str) -> None:
    model, cpu, why = UNSUPPORTED[name]
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 12)
    if name == "transpose_runtime_perm":
        inputs[1] = np.array([2, 1, 0], np.int32)
    r = check_parity(model, runtime, inputs=inputs, expect_cpu=cpu)
    for node in cpu:
        assert why.lower() in r.reason(node).lower(), (node, r.decisions)
