"""Multi-op graphs: claimed and unclaimed ops alternating (several partitions),
max_delegated_partitions, run-time reshape targets (dynamic tensors), resize after
delegation, and models the delegate must survive (zero-size tensors, non-constant weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from parity import check_parity, compare, cpu_op, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.runtime import make_interpreter


def alternating_model() -> bytes:
    """conv | CUMSUM | conv, add | MUL | depthwise, transpose, add | CUMSUM: partitions of 1, 2, 3
    nodes."""
    b = ModelBuilder(seed=21)
    x = b.input("x", (2, 9, 7, 3))
    y = b.conv2d(x, b.rand((5, 3, 3, 3)), b.rand((5,)), activation="RELU")  # 0
    y = cpu_op(b, y)  # 1 CPU
    y = b.conv2d(y, b.rand((6, 3, 3, 5)), stride=2)  # 2
    y = b.add(y, b.rand((6,)), "RELU6")  # 3
    y = cpu_op(b, y)  # 4 CPU
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 6), scale=math.sqrt(2 / 9)), padding="VALID")  # 5
    y = b.transpose(y, (0, 3, 1, 2))  # 6
    y = b.add(y, b.rand((1, 6, 1, 1)))  # 7
    b.output(cpu_op(b, y))  # 8 CPU
    return b.build()


def test_alternating_ops_make_several_partitions(runtime: str, transfer: dict) -> None:
    r = check_parity(
        alternating_model(),
        runtime,
        expect_delegated={0, 2, 3, 5, 6, 7},
        expect_cpu={1, 4, 8},
        expect_partitions=3,
        **transfer,
    )
    assert sorted(map(sorted, r.partitions)) == [[0], [2, 3], [5, 6, 7]]
    assert r.reason(1) == "op not supported"
    assert r.stats["kernels_created"] == 3
    assert r.stats["invokes"] == 3  # one per partition per invoke


@pytest.mark.parametrize(("limit", "kept"), [(1, [[5, 6, 7]]), (2, [[5, 6, 7], [2, 3]]), (3, None)])
def test_max_delegated_partitions_keeps_the_largest(
    limit: int, kept: list | None, runtime: str
) -> None:
    r = check_parity(
        alternating_model(),
        runtime,
        max_delegated_partitions=limit,
        expect_partitions=min(limit, 3),
    )
    if kept is not None:
        assert sorted(r.partitions) == sorted(kept)  # the largest ones, in plan order
        assert r.delegated == {n for p in kept for n in p}
        dropped = {0, 2, 3, 5, 6, 7} - r.delegated
        assert all("max_delegated_partitions" in r.reason(n) for n in dropped)
    else:
        assert r.delegated == {0, 2, 3, 5, 6, 7}


def test_default_resolver_for_the_cpu_part(runtime: str) -> None:
    # What users get: the CPU part may run on XNNPACK; results still match the reference.
    model = alternating_model()
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 5)
    delegate = clgpu_delegate.load()
    interp = make_interpreter(model, [delegate], runtime=runtime)
    interp.allocate_tensors()
    compare(run(interp, inputs), run(ref, inputs), 1e-4, None)
    assert set(delegate.delegated_nodes()) == {0, 2, 3, 5, 6, 7}


def dynamic_reshape_model(batch: int = 2) -> bytes:
    """convs -> SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE (dynamic output) -> FC."""
    b = ModelBuilder(seed=22)
    x = b.input("x", (batch, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")  # 0
    y = b.conv2d(y, b.rand((5, 3, 3, 4)), b.rand((5,)), stride=2)  # 1
    f = b.dynamic_reshape_flatten(y)  # 2-5: SHAPE, STRIDED_SLICE, PACK, RESHAPE
    b.output(b.fully_connected(f, b.rand((7, 80)), b.rand((7,))))  # 6
    return b.build()


def test_dynamic_reshape_chain_is_folded_into_one_partition(runtime: str, transfer: dict) -> None:
    # SHAPE -> STRIDED_SLICE -> PACK is evaluated at Prepare (ops/shape_folding.h): the RESHAPE
    # is static and the graph one partition; its batch follows the input's on a resize (below).
    r = check_parity(dynamic_reshape_model(), runtime, expect_delegated="all", **transfer)
    assert r.partitions == [[0, 1, 2, 3, 4, 5, 6]]


@pytest.mark.parametrize("new_batch", [5, 1, 0])
def test_dynamic_reshape_model_resized(new_batch: int, runtime: str, transfer: dict) -> None:
    _check_resize(
        dynamic_reshape_model(), runtime, [(new_batch, 8, 8, 3), (3, 8, 8, 3)], **transfer
    )


def resizable_model() -> bytes:
    b = ModelBuilder(seed=23)
    x = b.input("x", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 4), scale=math.sqrt(2 / 9)), stride=2)
    y = cpu_op(b, y)  # CPU, between two partitions
    y = b.add(y, b.rand((4,)))
    y = b.fully_connected(y, b.rand((6, 4)), keep_num_dims=True)
    b.output(b.transpose(y, (0, 3, 1, 2)))
    return b.build()


def _check_resize(
    model: bytes, runtime: str, shapes: list[tuple[int, ...]], **options: str
) -> None:
    delegate = clgpu_delegate.load(**options)
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    claimed = delegate.delegated_nodes()
    assert claimed
    index = interp.get_input_details()[0]["index"]
    for i, shape in enumerate(shapes):
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        ref.resize_tensor_input(ref.get_input_details()[0]["index"], shape)
        ref.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), seed=i)
        interp.resize_tensor_input(index, shape)
        interp.allocate_tensors()
        expected = run(ref, inputs)
        compare(run(interp, inputs), expected, 1e-4, None, f" after resize to {shape}")
        # Still delegated: our kernels ran for this shape.
        assert delegate.delegated_nodes() == claimed
    assert delegate.stats().invokes >= len(shapes)


@pytest.mark.parametrize("arena", ["", "svm", "shared"])
def test_resize_after_delegation(
    arena: str, runtime: str, transfer: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each resize re-plans: the arena's views (sub-buffers, or SVM views as on NVIDIA,
    # whose driver crashed releasing used sub-buffers here) are released and made anew.
    if arena:
        monkeypatch.setenv("CLGPU_ARENA", arena)
    _check_resize(
        resizable_model(),
        runtime,
        [(2, 13, 11, 3), (1, 5, 7, 3), (3, 16, 9, 3), (1, 8, 8, 3)],
        **transfer,
    )


def test_resize_same_shape_and_back(runtime: str) -> None:
    _check_resize(resizable_model(), runtime, [(1, 8, 8, 3), (2, 8, 8, 3), (1, 8, 8, 3)])


def test_resize_to_tiny_and_empty_batch(runtime: str) -> None:
    _check_resize(
        resizable_model(), runtime, [(1, 1, 1, 3), (0, 8, 8, 3), (1, 2, 2, 3), (2, 9, 9, 3)]
    )


# ---- empty tensors: stock TFLite itself may crash on them, so each run is its own process ---

# Runs MODEL (argv[1]) on RUNTIME with or without the delegate, optionally resized, and saves
# the outputs; prints one JSON report line (also before invoke, in case invoke crashes).
_RUN_ISOLATED = """
import json, sys
import numpy as np
import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter
model_path, runtime, mode, shape, out_path = sys.argv[1:6]
model, shape = open(model_path, "rb").read(), json.loads(shape)
delegate = clgpu_delegate.load() if mode == "delegate" else None
report = {"status": "crash"}
try:
    interp = make_interpreter(model, [delegate] if delegate else None, runtime=runtime,
                              reference=True)
    interp.allocate_tensors()
    if shape:
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], shape)
        interp.allocate_tensors()
    report["delegated"] = delegate.delegated_nodes() if delegate else []
    print(json.dumps(report), flush=True)
    rng = np.random.default_rng(0)
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(np.float32))
    interp.invoke()
    np.savez(out_path, *[interp.get_tensor(d["index"]) for d in interp.get_output_details()])
    report["status"] = "ok"
except RuntimeError as e:
    report.update(status="error", message=str(e))
print(json.dumps(report), flush=True)
"""


def _run_isolated(
    run_python, tmp_path, model: bytes, runtime: str, mode: str, shape: tuple[int, ...] | None
) -> tuple[dict, list[np.ndarray]]:
    import json

    model_path, out_path = tmp_path / "model.tflite", tmp_path / f"{mode}.npz"
    model_path.write_bytes(model)
    p = run_python(
        [
            "-c",
            _RUN_ISOLATED,
            str(model_path),
            runtime,
            mode,
            json.dumps(list(shape) if shape else None),
            str(out_path),
        ]
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"status": "crash"}
    if p.returncode != 0:
        report.update(status="crash", message=f"exit {p.returncode}: {p.stderr[-500:]}")
    outputs = []
    if report["status"] == "ok":
        with np.load(out_path) as npz:
            outputs = [npz[f"arr_{i}"] for i in range(len(npz.files))]
    return report, outputs


def _check_isolated(
    run_python,
    tmp_path,
    model: bytes,
    runtime: str,
    shape: tuple[int, ...] | None,
    request: pytest.FixtureRequest,
) -> None:
    """Whatever the CPU does with this model, the delegated interpreter does too: the same
    outputs when the CPU runs it; an error (never a crash) when the CPU refuses it. A crash of
    stock TFLite's own kernel (2.14's conv divides by zero on an empty image) is not ours."""
    ref, expected = _run_isolated(run_python, tmp_path, model, runtime, "reference", shape)
    got, outputs = _run_isolated(run_python, tmp_path, model, runtime, "delegate", shape)
    where = f" [{runtime}, resize {shape}] reference: {ref}, delegated: {got}"
    if ref["status"] == "ok":
        assert got["status"] == "ok", "the CPU runs this model, the delegate does not" + where
        compare(outputs, expected, 1e-4, None, where)
    elif got["status"] == "crash":
        assert ref["status"] == "crash", "the delegate turned an error into a crash" + where


EMPTY_IMAGE_OPS = ("conv2d", "depthwise_conv2d")


@pytest.mark.parametrize("op", EMPTY_IMAGE_OPS)
def test_resize_until_a_valid_conv_output_is_empty(
    op: str, runtime: str, run_python, tmp_path, request
) -> None:
    # A VALID 3x3 window on a 2x2 input gives an empty output.
    b = ModelBuilder(seed=28)
    x = b.input("x", (1, 8, 8, 3))
    y = (
        b.conv2d(x, b.rand((4, 3, 3, 3)), padding="VALID")
        if op == "conv2d"
        else b.depthwise_conv2d(x, b.rand((1, 3, 3, 3)), padding="VALID")
    )
    b.output(y)
    _check_isolated(
        run_python, tmp_path, b.build(), runtime, (1, 2, 2, 3), request
    )


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        ("conv2d", (0, 5, 5, 3)),
        ("conv2d", (2, 0, 5, 3)),
        ("conv2d", (2, 5, 0, 3)),
        ("depthwise_conv2d", (0, 4, 4, 3)),
        ("depthwise_conv2d", (1, 0, 4, 3)),
        ("fully_connected", (0, 6)),
        ("fully_connected", (2, 0, 6)),
        ("transpose", (2, 0, 3)),
        ("add", (0, 3, 2)),
        ("add", (2, 0, 3)),
        ("reshape", (0, 3, 4)),
        ("split_v", (2, 0, 6)),
    ],
)
def test_zero_size_tensor_does_not_crash(
    op: str, shape: tuple[int, ...], runtime: str, run_python, tmp_path, request
) -> None:
    b = ModelBuilder(seed=24)
    x = b.input("x", shape)
    c = shape[-1]
    y = {
        "conv2d": lambda: b.conv2d(x, b.rand((4, 3, 3, c))),
        "depthwise_conv2d": lambda: b.depthwise_conv2d(x, b.rand((1, 3, 3, c))),
        "fully_connected": lambda: b.fully_connected(x, b.rand((4, c)), keep_num_dims=True),
        "transpose": lambda: b.transpose(x, list(range(len(shape)))[::-1]),
        "add": lambda: b.add(x, b.rand((c,))),
        "reshape": lambda: b.reshape(x, (-1, c), resolve=False),
        "split_v": lambda: b.split_v(x, (0, 2, 4), -1)[2],
    }[op]()
    b.output(cpu_op(b, y))  # and a CPU op reading the empty result
    _check_isolated(run_python, tmp_path, b.build(), runtime, None, request)


@pytest.mark.parametrize("op", ["conv2d", "depthwise_conv2d"])
def test_non_constant_weights_stay_on_cpu(op: str, runtime: str) -> None:
    # (FULLY_CONNECTED takes run-time weights: tests/test_fully_connected.py.)
    b = ModelBuilder(seed=25)
    x = b.input("x", (1, 6, 6, 3))
    if op == "conv2d":
        y = b.conv2d(x, b.input("w", (4, 3, 3, 3)))
    else:
        y = b.depthwise_conv2d(x, b.input("w", (1, 3, 3, 3)))
    b.output(b.add(y, 1.0))  # a claimable consumer of the CPU result
    r = check_parity(b.build(), runtime, expect_delegated={1}, expect_cpu={0})
    assert "not constant" in r.reason(0)


def test_non_constant_bias_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=26)
    x = b.input("x", (1, 6, 6, 3))
    b.output(b.conv2d(x, b.rand((4, 3, 3, 3)), b.input("bias", (4,))))
    r = check_parity(b.build(), runtime, expect_cpu="all")
    assert "bias" in r.reason(0)


def test_two_graph_inputs_feed_one_partition(runtime: str) -> None:
    b = ModelBuilder(seed=29)
    x = b.input("x", (1, 5, 5, 2))
    y = b.input("y", (1, 5, 5, 2))
    s = b.add(x, y)
    b.output(b.conv2d(s, b.rand((3, 3, 3, 2))))
    b.output(b.conv2d(y, b.rand((3, 1, 1, 2)), activation="RELU"))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_partitions_with_only_constant_inputs(runtime: str) -> None:
    # Ops whose operands are all constants still run (nothing to upload).
    b = ModelBuilder(seed=30)
    x = b.input("x", (2, 3, 4))
    c = b.const(b.rand((2, 3, 4), scale=1.0))
    b.output(cpu_op(b, x))  # 0 CPU
    b.output(b.add(b.rand((3, 4)), b.rand((1, 4))))  # 1: const + const
    b.output(b.transpose(c, (2, 1, 0)))  # 2: transpose of a constant
    b.output(b.add(x, c, "RELU"))  # 3
    check_parity(b.build(), runtime, expect_delegated={1, 2, 3}, expect_cpu={0})


def test_graph_input_is_also_graph_output(runtime: str) -> None:
    # A partition input that the graph also outputs, and an op output read twice.
    b = ModelBuilder(seed=27)
    x = b.input("x", (1, 5, 6, 2))
    y = b.conv2d(x, b.rand((3, 1, 1, 2)))
    b.output(x)
    b.output(b.add(y, y))
    b.output(cpu_op(b, y))
    check_parity(b.build(), runtime, expect_delegated={0, 1}, expect_cpu={2})


def test_lenet5_from_the_zoo(runtime: str) -> None:
    # 5x5 convs, AVERAGE_POOL between them, RESHAPE, FCs, SOFTMAX: a real little network,
    # all of it one partition.
    r = check_parity(zoo.build("lenet5"), runtime, expect_delegated="all", expect_partitions=1)
    assert np.isclose(r.outputs[0].sum(), r.outputs[0].shape[0], rtol=1e-5)


# Inception v3's VALID stem and reductions need at least 75 pixels.
@pytest.mark.parametrize(("name", "size"), [("mobilenet_v2", 48), ("inception_v1", 48),
                                            ("inception_v3", 75)])
def test_zoo_network_small_input(name: str, size: int, runtime: str) -> None:
    # Realistic channel counts and depth; a small input keeps it quick on a CPU device.
    model = zoo.build(name, size=size, num_classes=37, softmax=False)
    r = check_parity(model, runtime)
    claimable = {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "FULLY_CONNECTED", "CONCATENATION",
                 "MAX_POOL_2D", "AVERAGE_POOL_2D"}
    for d in r.decisions:
        if d.op_name in claimable:
            assert d.delegated, format(d)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_pynet_is_one_partition(precision: str, runtime: str) -> None:
    # Convs, max-pools, nearest and bilinear upsampling and channel concatenations: the
    # whole network in one partition, no host round trips between its stages.
    model = zoo.build("pynet", size=64)
    tol = {} if precision == "fp32" else {"rtol": 1e-2, "atol": 1e-2}
    r = check_parity(
        model, runtime, expect_delegated="all", expect_partitions=1, precision=precision, **tol
    )
    ops = {d.op_name for d in r.decisions}
    assert {"CONCATENATION", "MAX_POOL_2D", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"} <= ops
