"""DEQUANTIZE of constant FLOAT16 weights: claimed together with the conv / depthwise / FC
that reads it, and left on the CPU when a CPU op reads its output too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parity import check_parity, compare, cpu_op, random_inputs, run
from test_conv2d import CASES as CONV_CASES
from test_conv2d import conv_model
from test_depthwise_conv2d import CASES as DW_CASES
from test_depthwise_conv2d import depthwise_model
from test_fully_connected import CASES as FC_CASES
from test_fully_connected import fc_model

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

FP16_MODELS = {
    "conv2d_3x3": lambda: conv_model(CONV_CASES["3x3_batch2"], fp16_weights=True),
    "conv2d_1x1_nobias": lambda: conv_model(CONV_CASES["1x1_batch2_c35"], fp16_weights=True),
    "conv2d_5x5_d2": lambda: conv_model(CONV_CASES["5x5_d2_n1to1"], fp16_weights=True),
    "depthwise_m2": lambda: depthwise_model(DW_CASES["3x3_s2_m2_relu6"], fp16_weights=True),
    "fully_connected": lambda: fc_model(FC_CASES["3d_keep"], fp16_weights=True),
    "fully_connected_nobias": lambda: fc_model(FC_CASES["4d_flatten_nobias"], fp16_weights=True),
}


def fp16_weight(b: ModelBuilder, w: np.ndarray) -> int:
    """A FLOAT16 constant behind a DEQUANTIZE; returns the float32 output tensor.

    ModelBuilder only makes these inside conv2d/fully_connected(fp16_weights=True); a test
    that shares one between ops needs the tensor itself.
    """
    return b._weights(w, w.ndim, True, "shared")


@pytest.mark.parametrize("name", FP16_MODELS)
def test_fp16_weights_are_claimed_with_their_op(name: str, runtime: str) -> None:
    r = check_parity(FP16_MODELS[name](), runtime, expect_delegated="all", expect_partitions=1)
    ops = {d["op_name"] for d in r.decisions}
    assert "DEQUANTIZE" in ops and len(ops) == 2, ops


def test_dequantize_also_read_by_cpu_op_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 8, 9, 3))
    w = fp16_weight(b, b.rand((4, 3, 3, 3)))  # node 0
    y = b.conv2d(x, w, activation="RELU")  # node 1: delegated
    z = cpu_op(b, w)  # node 2: a CPU op reading the dequantized weights
    b.output(y)
    b.output(z)
    r = check_parity(b.build(), runtime, expect_delegated={1}, expect_cpu={0, 2})
    assert "CPU" in r.reason(0)


def test_dequantize_shared_by_claimed_and_unclaimed_conv(runtime: str) -> None:
    # Two convs share an fp16 filter; the one with a run-time bias stays on the CPU, so the
    # DEQUANTIZE must too.
    b = ModelBuilder(seed=8)
    x = b.input("x", (2, 7, 7, 3))
    w = fp16_weight(b, b.rand((5, 3, 3, 3)))  # node 0
    b.output(b.conv2d(x, w, activation="RELU6"))  # node 1
    b.output(b.conv2d(x, w, b.input("bias", (5,))))  # node 2
    check_parity(b.build(), runtime, expect_delegated={1}, expect_cpu={0, 2})


def test_dequantize_shared_by_two_claimed_ops(runtime: str) -> None:
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 6, 5, 4))
    w = fp16_weight(b, b.rand((4, 3, 3, 4)))
    y = b.conv2d(x, w, activation="RELU")
    b.output(b.conv2d(y, w, stride=2))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_dequantized_weight_that_is_also_a_graph_output(runtime: str) -> None:
    b = ModelBuilder(seed=10)
    x = b.input("x", (3, 6))
    w = fp16_weight(b, b.rand((5, 6)))
    b.output(b.fully_connected(x, w))
    b.output(w)
    # Claiming the DEQUANTIZE too is fine as long as the partition writes that output.
    r = check_parity(b.build(), runtime)
    assert 1 in r.delegated


def test_dequantized_constant_added_or_transposed(runtime: str) -> None:
    # An fp16 constant that is not a weight: ADD operand, and the only input of a TRANSPOSE.
    b = ModelBuilder(seed=12)
    x = b.input("x", (2, 3, 4))
    b.output(b.add(x, fp16_weight(b, b.rand((3, 4)))))
    b.output(b.transpose(fp16_weight(b, b.rand((3, 5))), (1, 0)))
    check_parity(b.build(), runtime, expect_delegated="all")


def test_dequantize_read_only_by_a_cpu_op_is_not_claimed(runtime: str) -> None:
    b = ModelBuilder(seed=11)
    x = b.input("x", (1, 5, 5, 2))
    lonely = fp16_weight(b, b.rand((2, 2)))  # node 0, read by the CPU op only
    b.output(b.conv2d(x, b.rand((3, 1, 1, 2))))  # node 1
    b.output(cpu_op(b, lonely))  # node 2
    r = check_parity(b.build(), runtime, expect_delegated={1}, expect_cpu={0, 2})
    assert r.reason(0)


def converter_ordered_model(blocks: int = 4) -> tuple[bytes, set[int]]:
    """conv -> CUMSUM blocks whose fp16 weights are all dequantized first, as TF's converter
    orders them (face_detection_back has 138 such DEQUANTIZEs ahead of its first conv).
    Returns the model and the DEQUANTIZE output tensors."""
    b = ModelBuilder(seed=13)
    x = b.input("x", (1, 12, 12, 4))
    weights = [fp16_weight(b, b.rand((4, 3, 3, 4), scale=0.3)) for _ in range(blocks)]
    for i, w in enumerate(weights):
        x = b.conv2d(x, w, activation="RELU")
        if i < blocks - 1:
            x = cpu_op(b, x)  # on the CPU: one partition of ours per conv
    b.output(x)
    return b.build(), set(weights)


def _delegate_nodes(interp: Any) -> list[dict[str, Any]]:
    """The delegate kernels (ours and XNNPACK's) the interpreter holds."""
    return [op for op in interp._get_ops_details() if op["op_name"] == "DELEGATE"]


@pytest.mark.parametrize("options", [{"max_delegated_partitions": 1}, {}])
def test_dropped_partitions_leave_their_weights_constant_for_the_cpu(
    options: dict, runtime: str
) -> None:
    # TFLite's partitioner puts every DEQUANTIZE (no run-time input) into the first partition.
    # Kept there after their convs went back to the CPU, they made that partition hand the
    # weights to the CPU on every invoke: the CPU convs then read run-time tensors, which
    # XNNPACK declines, so its single partition broke into pieces around ours.
    model, weights = converter_ordered_model()
    r = check_parity(model, runtime, partitioning="all", **options)
    partition_of = {n: i for i, p in enumerate(r.partitions) for n in p}
    ops = {op["index"]: op for op in r.interpreter._get_ops_details()}
    for d in r.decisions:
        if d["op_name"] != "DEQUANTIZE" or not d["delegated"]:
            continue
        readers = [i for i, op in ops.items() if set(op["inputs"]) & set(ops[d["node"]]["outputs"])]
        assert {partition_of.get(n) for n in readers} == {partition_of[d["node"]]}, d

    # What users get: the default resolver (XNNPACK) for what stays on the CPU.
    cpu = make_interpreter(model, None, runtime=runtime)
    cpu.allocate_tensors()
    delegate = clgpu_delegate.load(partitioning="all", **options)
    interp = make_interpreter(model, [delegate], runtime=runtime)
    interp.allocate_tensors()
    ours = len(delegate.partitions())
    assert ours == options.get("max_delegated_partitions", 4)
    x = random_inputs(cpu.get_input_details(), 3)
    run(interp, x)
    before = delegate.stats()
    compare(run(interp, x), run(cpu, x), 1e-4, None)
    after = delegate.stats()
    # Each partition of ours hands back its conv's activation, never a weight...
    assert after.downloads - before.downloads == ours
    assert after.download_bytes - before.download_bytes == ours * 12 * 12 * 4 * 4
    # ...and the CPU's accelerated part is at most cut in two by each partition of ours.
    assert len(_delegate_nodes(interp)) <= len(_delegate_nodes(cpu)) + 2 * ours


def test_dequantize_whose_output_disagrees_with_its_source_folds_in_its_shape(runtime: str) -> None:
    # A hostile model: 15 FLOAT16 values behind a DEQUANTIZE declared as 5x6. Folded, the FC
    # would read 30 weights from 15 (past the end, changing from run to run).
    b = ModelBuilder(seed=14)
    x = b.input("x", (2, 6))
    w = fp16_weight(b, b.rand((5, 6)))
    b.output(b.fully_connected(x, w))
    src = b._ops[0].inputs[0]
    b._tensors[src].shape = (5, 3)
    b._tensors[src].data = b._tensors[src].data.reshape(-1)[:15].reshape(5, 3)
    # Not folded as a dequantized weight of the declared shape. The constant-subgraph fold
    # runs TFLite's own DEQUANTIZE at Prepare instead, which gives the source's shape (5x3), so
    # the FC reads 15 weights, as the CPU's own FC does.
    r = check_parity(b.build(), runtime, expect_delegated="all")
    assert r.outputs[0].shape == (4, 5)


def test_dequantize_whose_output_has_another_shape_is_not_folded(runtime: str) -> None:
    # The same elements in another shape (a fuzzed hand_landmark: a 1x1 conv's filter read
    # from another layer's [112, 1, 1, 672] weight declared [672, 1, 1, 112]). TFLite's
    # DEQUANTIZE gives its output the source's shape, and the conv's Prepare refuses it there;
    # folded with the declared shape, the delegate ran the model.
    b = ModelBuilder(seed=14)
    x = b.input("x", (1, 3, 3, 6))
    b.output(b.conv2d(x, fp16_weight(b, b.rand((4, 1, 1, 6))), b.rand((4,))))
    src = b._ops[0].inputs[0]
    b._tensors[src].shape = (6, 1, 1, 4)
    b._tensors[src].data = b._tensors[src].data.reshape(6, 1, 1, 4)
    model = b.build()
    for delegates in (None, [clgpu_delegate.load(partitioning="all")]):
        it = make_interpreter(model, delegates, runtime=runtime, reference=True)
        with pytest.raises(RuntimeError, match="failed to prepare"):
            it.allocate_tensors()
