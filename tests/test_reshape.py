"""RESHAPE, SQUEEZE and EXPAND_DIMS parity with stock TFLite CPU: the device copies the buffer
(no kernel). Targets from the shape tensor or from ReshapeOptions, -1 resolved by us or by the
runtime, fp16 storage, tensors larger than the largest allocation (copied piece by piece), a
batch resized after delegation; a target computed at run time, a changed element count and
int32 data stay on the CPU. Zoo AlexNet (conv trunk -> RESHAPE -> FCs) is one partition."""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import numpy as np
import pytest
from parity import check_parity, compare, random_inputs, run
from test_fp16 import check_fp16
from test_graphs import dynamic_reshape_model

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.modelgen.builder import tflite
from clgpu_delegate.runtime import make_interpreter


class Reshape(NamedTuple):
    shape: tuple[int, ...]
    op: str  # "reshape", "reshape_params" (ReshapeOptions only), "squeeze", "expand_dims"
    arg: object  # the target, the squeezed axes or the new axis
    resolve: bool = True  # False: the -1 stays in the model for the runtime to resolve


CASES = {
    "flatten_minus_one": Reshape((1, 4, 4, 3), "reshape", (1, -1), resolve=False),
    "batch_flatten": Reshape((2, 3, 5, 4), "reshape", (-1, 60), resolve=False),
    "minus_one_inside": Reshape((2, 6, 5, 3), "reshape", (2, -1, 3, 5), resolve=False),
    "resolved": Reshape((1, 7, 3, 5), "reshape", (7, 15)),
    "rank1_to_3": Reshape((24,), "reshape", (2, 3, 4)),
    "to_rank6": Reshape((2, 3, 4, 5), "reshape", (2, 1, 3, 4, 5, 1)),
    "same_shape": Reshape((1, 5, 5, 2), "reshape", (1, 5, 5, 2)),
    "to_scalar": Reshape((1, 1, 1, 1), "reshape", ()),
    "params_only": Reshape((1, 6, 4), "reshape_params", (4, 6)),
    "params_minus_one": Reshape((3, 2, 5), "reshape_params", (-1, 5), resolve=False),
    "squeeze_all": Reshape((1, 1, 5, 1, 3), "squeeze", ()),
    "squeeze_axes": Reshape((1, 4, 1, 3), "squeeze", (0, -2)),
    "expand_front": Reshape((4, 6), "expand_dims", 0),
    "expand_back": Reshape((2, 3, 4), "expand_dims", -1),
    "expand_middle": Reshape((2, 3, 4), "expand_dims", 2),
}


def apply(b: ModelBuilder, x: int, case: Reshape) -> int:
    if case.op == "squeeze":
        return b.squeeze(x, case.arg)
    if case.op == "expand_dims":
        return b.expand_dims(x, case.arg)
    params_only = case.op == "reshape_params"
    return b.reshape(x, case.arg, resolve=case.resolve, shape_tensor=not params_only)


def reshape_model(case: Reshape, seed: int = 0) -> bytes:
    b = ModelBuilder(seed=seed)
    b.output(apply(b, b.input("x", case.shape), case))
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_reshape_parity(case: Reshape, runtime: str) -> None:
    r = check_parity(reshape_model(case), runtime, expect_delegated="all", atol=0, rtol=0)
    assert {d.op_name for d in r.decisions} == {case.op.split("_params")[0].upper()}


@pytest.mark.parametrize("name", ["batch_flatten", "squeeze_axes", "expand_middle"])
def test_reshape_transfers(name: str, runtime: str, transfer: dict) -> None:
    # Graph input straight to graph output: copied between TFLite's own buffers (zero-copy)
    # or between device buffers.
    check_parity(
        reshape_model(CASES[name]), runtime, expect_delegated="all", atol=0, rtol=0, **transfer
    )


@pytest.mark.parametrize("name", ["flatten_minus_one", "params_only", "squeeze_all"])
def test_reshape_fp16(name: str, runtime: str) -> None:
    check_fp16(reshape_model(CASES[name]), runtime)


def between_convs_model(seed: int = 3) -> bytes:
    """conv -> RESHAPE (rows and columns swap roles) -> conv -> SQUEEZE/EXPAND_DIMS -> conv."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (2, 6, 5, 8))
    y = b.conv2d(x, b.rand((6, 3, 3, 8)), b.rand((6,)), activation="RELU")
    y = b.reshape(y, (2, 5, 6, 6))
    y = b.conv2d(y, b.rand((4, 3, 3, 6)), padding="VALID")  # (2, 3, 4, 4)
    y = b.expand_dims(b.squeeze(b.reshape(y, (1, 2, 12, 4)), (0,)), 1)  # (2, 1, 12, 4)
    b.output(b.conv2d(y, b.rand((3, 1, 3, 4))))
    return b.build()


def alexnet_like_model(seed: int = 5) -> bytes:
    """conv -> max-pool -> RESHAPE (1, -1) -> FC -> FC, as AlexNet's head."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 13, 11, 3))
    y = b.conv2d(x, b.rand((16, 3, 3, 3)), b.rand((16,)), stride=2, activation="RELU")
    y = b.max_pool2d(y, 2, 2)
    y = b.reshape(y, (1, -1), resolve=False)
    k = b.shape(y)[1]
    y = b.fully_connected(y, b.rand((24, k)), b.rand((24,)), activation="RELU")
    b.output(b.fully_connected(y, b.rand((7, 24)), b.rand((7,))))
    return b.build()


def test_reshape_between_convs_one_partition(runtime: str, transfer: dict) -> None:
    r = check_parity(
        between_convs_model(), runtime, expect_delegated="all", expect_partitions=1, **transfer
    )
    assert {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"} <= {d.op_name for d in r.decisions}


@pytest.mark.parametrize("arena", ["shared", "subbuffers", "svm"])
def test_reshape_in_shared_buffers_and_arena_views(
    arena: str, monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    # Whole shared buffers or views of one arena (sub-buffers, or SVM views as on NVIDIA;
    # copies then address the arena at the views' offsets): source and destination never overlap.
    monkeypatch.setenv("CLGPU_ARENA", arena)
    r = check_parity(between_convs_model(), runtime, expect_delegated="all", zero_copy="off")
    part = r.delegate.memory().partitions[0]
    assert part.arena == arena.replace("subbuffers", "sub-buffers"), part
    assert part.buffers == 1 if arena != "shared" else part.buffers >= 2, part


def test_conv_reshape_fc_one_partition(runtime: str) -> None:
    check_parity(alexnet_like_model(), runtime, expect_delegated="all", expect_partitions=1)


@pytest.mark.parametrize("model", [between_convs_model, alexnet_like_model])
def test_reshape_in_a_network_fp16(model, runtime: str) -> None:
    check_fp16(model(), runtime)


def test_reshape_of_a_constant(runtime: str) -> None:
    # A constant reshaped on the device (uploaded once), then added to the input.
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 3, 4, 5))
    c = b.reshape(b.const(b.rand((12, 5), scale=1.0)), (1, 3, 4, 5))
    b.output(b.add(x, c))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_reshape_of_an_empty_batch(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (0, 4, 3))
    b.output(b.add(b.reshape(x, (-1, 12), resolve=False), 1.0))
    r = check_parity(b.build(), runtime, expect_delegated="all", atol=0, rtol=0)
    assert r.outputs[0].shape == (0, 12)


def test_reshape_between_activations_copies_nothing(runtime: str) -> None:
    # Its output is kept in its input's storage (the partition's AliasFlatCopies): no command.
    r = check_parity(alexnet_like_model(), runtime, expect_delegated="all", profiling=True)
    assert not [k for k in r.delegate.profile().kernels if k.op == "RESHAPE"]


def test_reshape_profile_names_the_copy(runtime: str) -> None:
    # capture_tensors reads every tensor back, so each keeps its own storage: one copy.
    r = check_parity(
        alexnet_like_model(), runtime, expect_delegated="all", profiling=True, capture_tensors=True
    )
    copies = [k for k in r.delegate.profile().kernels if k.op == "RESHAPE"]
    assert copies and {(k.kernel, k.algorithm) for k in copies} == {("copy", "buffer_copy")}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("arena", ["shared", "subbuffers", "svm"])
@pytest.mark.parametrize("model", [between_convs_model, alexnet_like_model])
def test_reshape_between_activations_runs_nothing(
    model, arena: str, precision: str, monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    # Between two activations the output is the input's memory under another shape, a chain of
    # RESHAPE / SQUEEZE / EXPAND_DIMS included: no copy runs, and the values are right in every
    # kind of activation memory.
    monkeypatch.setenv("CLGPU_ARENA", arena)
    tol = {"rtol": 1e-2, "atol": 1e-2} if precision == "fp16" else {}
    r = check_parity(
        model(), runtime, expect_delegated="all", profiling=True, precision=precision, **tol
    )
    ops = {k.op for k in r.delegate.profile().kernels}
    assert not ops & {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}, ops


# ---- larger than the largest allocation: copied piece by piece, never in chunks ----------


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(
    ("shape", "target"),
    [
        # 1920 floats: pieces of 8 and 7 rows (1024 + 896) into pieces of one row (640 each).
        ((1, 15, 16, 8), (3, 640)),
        ((2, 9, 7, 12), (-1, 84)),
    ],
)
def test_reshape_of_tensors_in_pieces(
    shape: tuple[int, ...], target: tuple[int, ...], precision: str, runtime: str
) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", shape)
    y = b.add(x, 0.5)  # an op before and after: the pieces live inside the partition too
    y = b.reshape(y, target, resolve=False)
    b.output(b.add(y, b.rand(b.shape(y)[-1:], scale=1.0)))
    limit = 4096 if precision == "fp32" else 2048  # the same pieces in half storage
    tol = {} if precision == "fp32" else {"rtol": 1e-2, "atol": 1e-2 * 8}
    r = check_parity(
        b.build(),
        runtime,
        expect_delegated="all",
        expect_partitions=1,
        max_alloc_bytes=limit,
        precision=precision,
        **tol,
    )
    mem = r.delegate.memory()
    assert mem.split_tensors >= 2 and mem.split_pieces > mem.split_tensors, mem
    reshape = next(d for d in r.decisions if d.op_name == "RESHAPE")
    assert "pieces" in reshape.note, reshape


def test_reshape_graph_input_and_output_in_pieces(runtime: str, transfer: dict) -> None:
    # Boundary tensors in pieces: uploaded and downloaded a range at a time around the copies.
    model = reshape_model(Reshape((1, 15, 16, 8), "reshape", (3, 640)))
    r = check_parity(
        model, runtime, expect_delegated="all", atol=0, rtol=0, max_alloc_bytes=4096, **transfer
    )
    assert r.delegate.memory().split_tensors == 2


# ---- a batch resized after delegation: -1 resolved again -----------------------------------


def test_resize_resolves_minus_one_again(runtime: str, transfer: dict) -> None:
    b = ModelBuilder(seed=8)
    x = b.input("x", (2, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), stride=2, activation="RELU")
    y = b.reshape(y, (-1, 36), resolve=False)
    b.output(b.fully_connected(y, b.rand((5, 36)), b.rand((5,))))
    model = b.build()
    delegate = clgpu_delegate.load(**transfer)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    assert len(delegate.delegated_nodes()) == 3
    for i, shape in enumerate([(5, 6, 6, 3), (1, 6, 6, 3), (3, 6, 6, 3)]):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(ref.get_input_details()[0]["index"], shape)
        ref.allocate_tensors()
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], shape)
        interp.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), seed=i)
        compare(run(interp, inputs), run(ref, inputs), 1e-4, None, f" after resize to {shape}")
    assert delegate.stats()["invokes"] == 3


# ---- what stays on the CPU -------------------------------------------------------------------


def test_dynamic_flatten_is_folded(runtime: str, transfer: dict) -> None:
    # SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE: the target is evaluated at Prepare, its batch
    # kept as "the input's axis 0" (tests/test_graphs.py resizes it).
    r = check_parity(dynamic_reshape_model(), runtime, expect_delegated="all", **transfer)
    assert len(r.partitions) == 1


def _shape_of_other_tensor_model() -> bytes:
    """RESHAPE x (2, 12) to [SHAPE(z)[0], -1]: another tensor's extent, and the rest."""
    bi = tflite.BuiltinOperator
    b = ModelBuilder()
    x, z = b.input("x", (2, 12)), b.input("z", (2, 3))
    dims = b._op(
        bi.SHAPE,
        [z],
        [(2,)],
        options="ShapeOptions",
        out_dtype=np.int32,
        OutType=tflite.TensorType.INT32,
    )[0]
    ends = [b._int_const([k], f"k{k}") for k in (0, 1, 1)]
    first = b._op(
        bi.STRIDED_SLICE,
        [dims, *ends],
        [()],
        options="StridedSliceOptions",
        out_dtype=np.int32,
        ShrinkAxisMask=1,
    )[0]
    target = b._op(
        bi.PACK,
        [first, b._int_const(-1, "m1")],
        [(2,)],
        options="PackOptions",
        out_dtype=np.int32,
        ValuesCount=2,
        Axis=0,
    )[0]
    b.output(b._op(bi.RESHAPE, [b.relu(x), target], [(2, 12)], options="ReshapeOptions")[0])
    return b.build()


def test_target_from_other_tensors_extents_follows_them(runtime: str) -> None:
    # The target [SHAPE(z)[0], -1] is folded with z's extent as a rule (ops/shape_folding.h):
    # claimed, and re-evaluated when only z is resized (z's data is never read).
    model = _shape_of_other_tensor_model()
    r = check_parity(model, runtime, expect_delegated="all")
    assert r.outputs[0].shape == (2, 12)
    interp = r.interpreter
    z = interp.get_input_details()[1]["index"]
    for rows in (3, 6, 2):
        interp.resize_tensor_input(z, (rows, 3))
        interp.allocate_tensors()
        inputs = random_inputs(interp.get_input_details(), rows)
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(ref.get_input_details()[1]["index"], (rows, 3))
        ref.allocate_tensors()
        expected = run(ref, inputs)
        got = run(interp, inputs)
        assert got[0].shape == (rows, 24 // rows)
        compare(got, expected, 0, 0)


def test_runtime_shape_input_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (2, 3, 4))
    shape = b.input("shape", (2,), "int32")
    y = b._op(tflite.BuiltinOperator.RESHAPE, [x, shape], [(6, 4)], options="ReshapeOptions")[0]
    b.output(y)
    inputs = [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([4, 6], np.int32)]
    r = check_parity(b.build(), runtime, inputs=inputs, expect_cpu="all", atol=0, rtol=0)
    assert "run time" in r.reason(0), r.reason(0)
    assert r.outputs[0].shape == (4, 6)


def test_runtime_expand_dims_axis_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (2, 3))
    axis = b.input("axis", (), "int32")
    y = b._op(
        tflite.BuiltinOperator.EXPAND_DIMS, [x, axis], [(2, 1, 3)], options="ExpandDimsOptions"
    )[0]
    b.output(y)
    inputs = [np.ones((2, 3), np.float32), np.array(1, np.int32)]
    r = check_parity(b.build(), runtime, inputs=inputs, expect_cpu="all", atol=0, rtol=0)
    assert "run time" in r.reason(0), r.reason(0)


def test_int32_reshape_is_a_flat_copy_of_the_integers(runtime: str) -> None:
    # Token ids and masks (tests/test_cast.py): the integers as they are, past 2^24 too.
    b = ModelBuilder()
    b.output(b.expand_dims(b.reshape(b.input("a", (2, 6), "int32"), (3, 4)), 0))
    v = np.arange(12, dtype=np.int32).reshape(2, 6) * 1_000_003 - 2**30
    r = check_parity(b.build(), runtime, inputs=[v], expect_delegated="all", atol=0, rtol=0)
    np.testing.assert_array_equal(r.outputs[0], v.reshape(1, 3, 4))


def test_int32_reshape_to_another_type_stays_on_the_cpu(runtime: str) -> None:
    b = ModelBuilder()
    y = b.reshape(b.input("a", (2, 6), "int32"), (3, 4))
    b.output(y)
    b._tensors[y].dtype = np.dtype(np.float32)  # a hostile model's declaration
    r = _decision(b.build(), runtime)
    assert not r.delegated and "int32 values to another type" in r.reason, r.reason


def _decision(model: bytes, runtime: str) -> clgpu_delegate.NodeDecision:
    """The delegate's decision on node 0 (the CPU itself may refuse the model afterwards)."""
    d = clgpu_delegate.load(partitioning="all")
    with contextlib.suppress(RuntimeError, ValueError):
        make_interpreter(model, [d], runtime=runtime, reference=True).allocate_tensors()
    return d.decisions()[0]


def test_changed_element_count_is_declined(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (1, 4, 4, 3))
    y = b._op(
        tflite.BuiltinOperator.RESHAPE,
        [x, b._int_const([1, 50], "shape")],
        [(1, 50)],
        options="ReshapeOptions",
    )[0]
    b.output(y)
    d = _decision(b.build(), runtime)
    assert not d.delegated and "changes the element count" in d.reason, d


def test_two_minus_ones_are_declined(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (2, 3, 4))
    y = b._op(
        tflite.BuiltinOperator.RESHAPE,
        [x, b._int_const([-1, -1], "shape")],
        [(6, 4)],
        options="ReshapeOptions",
    )[0]
    b.output(y)
    d = _decision(b.build(), runtime)
    assert not d.delegated and "-1" in d.reason, d


def test_squeeze_of_an_axis_that_is_not_one_is_declined(runtime: str) -> None:
    b = ModelBuilder()
    x = b.input("x", (1, 4, 3))
    y = b._op(
        tflite.BuiltinOperator.SQUEEZE,
        [x],
        [(4, 3)],
        options="SqueezeOptions",
        SqueezeDims=[1],
    )[0]
    b.output(y)
    d = _decision(b.build(), runtime)
    assert not d.delegated and "is not 1" in d.reason, d


# ---- the zoo: AlexNet's trunk and head in one partition --------------------------------------


def test_alexnet_is_one_partition(runtime: str) -> None:
    model = zoo.alexnet(size=99, num_classes=10, softmax=False)
    r = check_parity(
        model, runtime, expect_delegated="all", expect_partitions=1, partitioning="all", rtol=1e-3
    )
    # Its grouped convs (SPLIT -> conv per group -> CONCATENATION) included.
    ops = [d.op_name for d in r.decisions]
    assert ops.count("SPLIT") == 3 and {"RESHAPE", "FULLY_CONNECTED"} <= set(ops), ops
