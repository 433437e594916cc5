"""TRANSPOSE_CONV (src_cpp/ops/transpose_conv.cc) against stock TFLite CPU: Keras'
Conv2DTranspose (2x2 stride 2 SAME), odd kernels and strides, VALID, bias, fused activations,
fp16 storage, an output shape built from SHAPE at run time (folded, and followed on a resize),
a U-Net-like up step, and what stays on the CPU."""

from __future__ import annotations

import pytest
from parity import check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

# (input NHWC, (OC, KH, KW), output HW, stride, padding)
CASES = {
    "keras_2x2_s2": ((1, 6, 5, 8), (4, 2, 2), (12, 10), 2, "SAME"),
    "k3_s2_same": ((2, 5, 4, 3), (6, 3, 3), (10, 8), 2, "SAME"),
    "k3_s2_valid": ((1, 5, 4, 3), (5, 3, 3), (11, 9), 2, "VALID"),
    "k4_s3_same": ((1, 4, 4, 2), (3, 4, 4), (12, 12), 3, "SAME"),
    "k3_s1_same": ((1, 7, 6, 5), (4, 3, 3), (7, 6), 1, "SAME"),
    "k5_s2_odd_out": ((1, 4, 3, 3), (2, 5, 5), (7, 5), 2, "SAME"),
}


def _model(case: str, bias: bool = False, act: str | None = None, dynamic: bool = False) -> bytes:
    shape, (oc, kh, kw), out_hw, stride, padding = CASES[case]
    b = ModelBuilder(seed=3)
    x = b.input("x", shape)
    w = b.rand((oc, kh, kw, shape[3]))
    bias_v = b.rand((oc,), 0.5) if bias else None
    b.output(b.transpose_conv(x, w, out_hw, stride, padding, bias_v, act, dynamic))
    return b.build()


@pytest.mark.parametrize("case", CASES)
def test_transpose_conv_parity(case: str, runtime: str) -> None:
    check_parity(_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("act", [None, "RELU", "RELU6"])
def test_transpose_conv_bias_and_activation(act: str | None, runtime: str) -> None:
    check_parity(_model("k3_s2_same", bias=True, act=act), runtime, expect_delegated="all")


def test_transpose_conv_fp16_storage(runtime: str) -> None:
    check_parity(
        _model("keras_2x2_s2", bias=True),
        runtime,
        rtol=1e-2,
        atol=3e-2,
        expect_delegated="all",
        precision="fp16",
    )


def test_runtime_output_shape_is_folded_and_follows_a_resize(runtime: str) -> None:
    model = _model("keras_2x2_s2", dynamic=True)
    r = check_parity(model, runtime, expect_delegated="all", expect_partitions=1)
    assert len(r.partitions[0]) == 4  # SHAPE, STRIDED_SLICE, PACK run nothing
    delegate = clgpu_delegate.load()
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    for batch in (3, 1):
        shape = (batch, 6, 5, 8)
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(0, shape)
        ref.allocate_tensors()
        interp.resize_tensor_input(0, shape)
        interp.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), batch)
        compare(run(interp, inputs), run(ref, inputs), 1e-4, None, f" batch {batch}")
    assert delegate.delegated_nodes()


def test_unet_up_step_is_one_partition(runtime: str) -> None:
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 8, 8, 4))
    skip = b.conv2d(x, b.rand((6, 3, 3, 4)), activation="RELU")
    down = b.max_pool2d(skip, 2, 2)
    up = b.transpose_conv(down, b.rand((6, 2, 2, 6)), (8, 8), 2, "SAME", dynamic_batch=True)
    b.output(b.conv2d(b.concat([up, skip], 3), b.rand((2, 3, 3, 12)), activation="RELU"))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_transpose_conv_with_runtime_weights_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 3, 3, 2))
    w = b.input("w", (4, 2, 2, 2))
    b.output(b.transpose_conv(x, w, (6, 6)))
    r = check_parity(b.build(), runtime, expect_cpu="all")
    assert "weights are not constant" in r.reason(0), r.reason(0)
