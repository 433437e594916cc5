"""The int8 foundation under the ops: TFLite's quantization structs as the delegate declares
them, per-value element types through transfers (copies and zero-copy), fp16 storage, pieces and
chunks, tensor capture, the runtime's rounding detection and the dot-product path reports."""

from __future__ import annotations

import numpy as np
import pytest
from int8_parity import check_int8_parity, quantized_inputs
from parity import run

import clgpu_delegate
from clgpu_delegate import check_precision
from clgpu_delegate._native import core
from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter


def test_quantization_abi_layout() -> None:
    # shared/research/tflite-abi.md 2.3, 2.4, 2.6: the same in both runtimes.
    layout = core().abi_layout()
    assert layout["offsetof_tensor_quantization"] == 80
    assert layout["sizeof_quantization"] == 16
    assert layout["sizeof_affine_quantization"] == 24
    assert layout["offsetof_affine_quantized_dimension"] == 16


def _small_int8(io: str = "int8", seed: int = 1) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 6, 7, 5))
    y = b.conv2d(x, b.rand((8, 3, 3, 5)), b.rand((8,), 0.2), activation="RELU")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 8), 0.5), b.rand((8,), 0.2))
    b.output(b.add(y, b.conv2d(y, b.rand((8, 1, 1, 8)))))
    return quantize_model(b.build(), io=io, seed=seed, jitter=0.2)


@pytest.mark.parametrize("io", ["int8", "float"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_int8_transfers(runtime: str, transfer: dict, io: str, precision: str) -> None:
    # Boundary tensors of int8 and float32 type, copied or used in place; int8 values stay
    # int8 under fp16 storage, and a float boundary that only QUANTIZE / DEQUANTIZE touch stays
    # float32: the results are the same bits in every combination.
    r = check_int8_parity(
        _small_int8(io), runtime, min_fraction=1.0, precision=precision, **transfer
    )
    np.testing.assert_array_equal(r.outputs[0], r.reference[0])
    assert r.delegate.stats()["invokes"] == 1


def test_int8_pieces_and_refusals(runtime: str) -> None:
    # A largest allocation of 2 KiB: a reshape of a 4 KiB int8 tensor copies piece by piece, a
    # pool and the convolution run in chunks (the int8 conv's weights, bias and output stage per
    # output-channel range), bit-exact as check_int8_parity asserts.
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 16, 16, 16))
    y = b.max_pool2d(b.reshape(x, (1, 16, 16, 16)), 2, 1, "SAME")
    b.output(b.conv2d(y, b.rand((4, 1, 1, 16))))
    model = quantize_model(b.build(), io="int8", seed=3)
    r = check_int8_parity(model, runtime, expect_delegated=None, max_alloc_bytes=2048)
    by_op = {d["op_name"]: d for d in r.decisions}
    assert by_op["RESHAPE"]["delegated"] and "pieces" in by_op["RESHAPE"]["note"]
    assert by_op["MAX_POOL_2D"]["delegated"] and "chunks" in by_op["MAX_POOL_2D"]["note"]
    assert by_op["CONV_2D"]["delegated"] and "chunks" in by_op["CONV_2D"]["note"]


def test_capture_reads_int8_values(runtime: str) -> None:
    model = _small_int8()
    ref = make_interpreter(model, runtime=runtime, reference=True, preserve_all_tensors=True)
    ref.allocate_tensors()
    inputs = quantized_inputs(ref.get_input_details())
    run(ref, inputs)
    delegate = clgpu_delegate.load(capture_tensors=True)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    run(interp, inputs)
    captured = delegate.captured()
    int8 = [t for t in captured if ref.get_tensor(t).dtype == np.int8]
    assert len(int8) >= 4
    for t in int8:  # every activation, as its integers
        np.testing.assert_array_equal(captured[t], ref.get_tensor(t).astype(np.float32))


def test_check_precision_on_int8_nodes(runtime: str) -> None:
    report = check_precision(_small_int8("float"), runtime=runtime)
    ops = {n.op for n in report.nodes}
    assert {"QUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "DEQUANTIZE"} <= ops
    for n in report.nodes:  # int8 nodes in quanta, float ends exact: no error at any precision
        assert all(e == (0.0, 0.0) for e in n.errors.values()), (n.op, n.errors)


def test_runtime_rounding_is_detected(runtime: str) -> None:
    # Requantization ties (power-of-two scales): right only with the rounding of the runtime the
    # delegate runs in, found from the library that calls it; the other runtime's differs.
    b = ModelBuilder()
    x = b.quant_input("x", (2, 3, 43), 0.25, 3)
    b.output(b.quantize(x, 1.0, -5))
    model = b.build()
    check_int8_parity(model, runtime, min_fraction=1.0)
    other = "tflite_runtime" if runtime == "ai_edge_litert" else "ai_edge_litert"
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = quantized_inputs(ref.get_input_details())
    expected = run(ref, inputs)[0]
    delegate = clgpu_delegate.load(runtime=other)  # the hint overrides the detection
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    assert (run(interp, inputs)[0] != expected).any()


def test_dot_product_path_is_reported() -> None:
    devs = clgpu_delegate.devices()
    assert all(d.int8_dot in ("dp4a", "khr", "portable") for d in devs)
    d = clgpu_delegate.load()
    assert d.device.int8_dot in ("dp4a", "khr", "portable")
    if d.device.type == "cpu":  # PoCL: no dp4a, so the portable path is what the tests run
        assert d.device.int8_dot != "dp4a"
