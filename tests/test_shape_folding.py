"""Shape computations folded at Prepare (src_cpp/ops/shape_folding.cc) as TF's converter writes
Keras' Dense on a 3-D input with an unknown batch: SHAPE -> GATHER -> REDUCE_PROD / PACK /
CONCATENATION -> RESHAPE, whose flattened tensor the model declares (1, 1). The RESHAPEs are
claimed, the shapes after them inferred, and every rule follows a resized batch."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from parity import check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

OPS = tflite.BuiltinOperator


def dense_model(shape: tuple[int, ...] = (1, 6, 8), units: int = 5, gelu: bool = True,
                stale_rows: bool = False) -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", shape)
    y = b.keras_dense(x, b.rand((units, shape[-1])), b.rand((units,)),
                      activation="gelu" if gelu else None, stale_rows=stale_rows)
    b.output(b.keras_dense(y, b.rand((3, units)), stale_rows=stale_rows))
    return b.build()


def _resized(model: bytes, runtime: str, interp, shapes) -> None:  # type: ignore[no-untyped-def]
    for shape in shapes:
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for i in (ref, interp):
            i.resize_tensor_input(i.get_input_details()[0]["index"], shape)
            i.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), len(shape))
        got, want = run(interp, inputs), run(ref, inputs)
        assert got[0].shape == want[0].shape
        compare(got, want, 1e-4, None, f" after resize to {shape}")


@pytest.mark.parametrize("shape", [(1, 6, 8), (2, 3, 4, 8)], ids=["3d", "4d"])
def test_keras_dense_is_one_partition(shape: tuple[int, ...], runtime: str) -> None:
    r = check_parity(dense_model(shape), runtime, expect_delegated="all", expect_partitions=1,
                     profiling=True)
    # The folded shape nodes run nothing; GELU folds into its FC through the RESHAPE.
    assert sorted(k.op for k in r.delegate.profile().kernels) == ["FULLY_CONNECTED"] * 2


def test_keras_dense_follows_a_resized_batch(runtime: str) -> None:
    model = dense_model()
    r = check_parity(model, runtime, expect_delegated="all")
    _resized(model, runtime, r.interpreter, [(3, 6, 8), (1, 6, 8), (0, 6, 8), (2, 6, 8)])


def test_keras_dense_follows_a_resized_sequence(runtime: str) -> None:
    # Every axis but the last is a rule of the input's extents, not a number.
    model = dense_model((2, 3, 4, 8))
    r = check_parity(model, runtime, expect_delegated="all")
    _resized(model, runtime, r.interpreter, [(2, 5, 1, 8), (1, 1, 7, 8)])


def test_keras_dense_fp16_storage(runtime: str) -> None:
    check_parity(dense_model(), runtime, expect_delegated="all", precision="fp16", rtol=1e-2,
                 atol=1e-2)


def _int_op(b: ModelBuilder, code: int, inputs: list[int], shape: tuple[int, ...],
            **fields: object) -> int:
    return b._op(code, inputs, [shape], out_dtype=np.int32, **fields)[0]  # type: ignore[arg-type]


def test_reduce_prod_of_constants_and_extents(runtime: str) -> None:
    # target = [prod(SHAPE(x)[0:2]) * prod([2]) / ..., -1]: a product of two extents and a
    # constant, as one rule; REDUCE_PROD with keep_dims and axis -1.
    bi = tflite.BuiltinOperator
    b = ModelBuilder(seed=4)
    x = b.input("x", (3, 4, 10))
    dims = _int_op(b, bi.SHAPE, [x], (3,), options="ShapeOptions",
                   OutType=tflite.TensorType.INT32)
    head = _int_op(b, bi.GATHER, [dims, b._int_const([0, 1], "i01")], (2,),
                   options="GatherOptions", Axis=0)
    two = b._int_const([2], "two")
    both = _int_op(b, bi.CONCATENATION, [head, two], (3,), options="ConcatenationOptions", Axis=0)
    rows = _int_op(b, bi.REDUCE_PROD, [both, b._int_const([-1], "m1")], (1,),
                   options="ReducerOptions", KeepDims=True)
    target = _int_op(b, bi.CONCATENATION, [rows, b._int_const([-1], "rest")], (2,),
                     options="ConcatenationOptions", Axis=0)
    y = b._op(bi.RESHAPE, [x, target], [(1, 1)], options="ReshapeOptions")[0]
    b.output(b.add(y, 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
    assert r.outputs[0].shape == (24, 5)
    _resized(b.build(), runtime, r.interpreter, [(5, 4, 10), (1, 2, 10)])


def test_stale_declared_shapes_are_inferred(runtime: str) -> None:
    # The FC after the folded RESHAPE reads a tensor declared (1, 1): its claim check sees the
    # inferred (6, 8) instead, so it is claimed (a multiple of K = 8).
    r = check_parity(dense_model(gelu=False), runtime, expect_delegated="all")
    fc = [d for d in r.decisions if d.op_name == "FULLY_CONNECTED"]
    assert len(fc) == 2 and all(d.delegated for d in fc)


@pytest.mark.parametrize("form", ["hybrid", "dequantize"])
def test_keras_dense_dynamic_range_is_one_partition(form: str, runtime: str) -> None:
    # TF's default quantization of the same Dense: int8 weights between the folded RESHAPEs. The
    # shapes inferred past the first RESHAPE must pass through the dynamic-range FULLY_CONNECTED
    # (it was marked after the folding, so the second RESHAPE saw the declared (1, 5) and stayed
    # on the CPU with the shape nodes: 17 partitions in a 4-layer Keras encoder).
    from clgpu_delegate.modelgen import dynamic_range_model

    model = dense_model(stale_rows=True)
    quantized = dynamic_range_model(model, per_channel=False, form=form)
    r = check_parity(quantized, runtime, rtol=0.0, atol=0.05, expect_delegated="all",
                     expect_partitions=1)
    # Against TFLite's float kernels on the dequantized weights: the delegate's arithmetic.
    reference = make_interpreter(dynamic_range_model(model, per_channel=False, form="float"),
                                 None, runtime=runtime, reference=True)
    reference.allocate_tensors()
    compare(r.outputs, run(reference, r.inputs), 1e-4, None, f" [{runtime}]")


@pytest.mark.parametrize("damage", ["begin_rank_0", "shape_out_type_float16"])
def test_what_the_cpu_refuses_is_not_folded(damage: str, runtime: str) -> None:
    # A shape computation TFLite's kernels refuse at prepare (a STRIDED_SLICE begin of rank 0, a
    # SHAPE whose options name FLOAT16) was folded all the same, so the model ran with the
    # delegate where it fails without (found by the fuzzer on the Keras set's int8 models).
    from clgpu_delegate.modelgen._reader import read_model
    from clgpu_delegate.modelgen.flatbuffer import write_model

    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 3, 4))
    y = b.add(x, b.rand((4,)))
    b.output(b.add(b._op(OPS.RESHAPE, [y, b.dynamic_flatten_target(y)], [(2, 12)])[0], 1.0))
    m = read_model(b.build())
    tensors = list(m.tensors)
    if damage == "begin_rank_0":
        begin = next(o for o in m.ops if o.code == OPS.STRIDED_SLICE).inputs[1]
        tensors[begin].shape = ()
    else:
        next(o for o in m.ops if o.code == OPS.SHAPE).fields["OutType"] = tflite.TensorType.FLOAT16
    model = write_model(tensors, m.ops, m.inputs, m.outputs)
    cpu = make_interpreter(model, None, runtime=runtime, reference=True)
    with pytest.raises(RuntimeError) as want:
        cpu.allocate_tensors()
    d = clgpu_delegate.load(partitioning="all", cpu_warmup=False)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    with pytest.raises(RuntimeError) as got:
        it.allocate_tensors()
    assert str(want.value).splitlines()[0] in str(got.value), (want.value, got.value)
