"""SPLIT / SPLIT_V parity with stock TFLite CPU (not the max-allocation suite, test_split.py):
every axis (negative too), 2-4 outputs, runs that do and do not allow float4 copies, batch > 1,
fp16 storage, SPLIT_V parts of size 0 (the other outputs are still written); an axis or sizes
known only at run time, int32 data and a split whose tensor exceeds the largest allocation are
declined. Zoo AlexNet (grouped convs as SPLIT -> convs -> CONCATENATION) is tested whole in
test_reshape.py."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from parity import check_parity, random_inputs, run
from test_fp16 import check_fp16

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class Split(NamedTuple):
    shape: tuple[int, ...]
    axis: int
    num: int = 2
    sizes: tuple[int, ...] = ()  # SPLIT_V when set


CASES = {
    "c_2_vec4": Split((1, 6, 5, 8), 3),
    "c_3_odd": Split((2, 5, 7, 9), 3, 3),  # C not a multiple of 4: scalar copies
    "c_4_neg": Split((1, 4, 3, 12), -1, 4),
    "h_2": Split((2, 6, 5, 6), 1),
    "w_3_neg": Split((1, 5, 6, 3), -2, 3),
    "batch_4": Split((4, 3, 3, 5), 0, 4),
    "batch_2_c": Split((2, 3, 4, 8), 3, 2),
    "rank2_axis1": Split((4, 9), 1, 3),
    "rank1": Split((12,), 0, 3),
    "rank5": Split((2, 3, 4, 2, 5), 2, 2),
    "single_output": Split((2, 3, 4, 5), 3, 1),
    "v_c_odd": Split((1, 4, 3, 10), 3, sizes=(3, 4, 3)),
    "v_c_vec4": Split((2, 4, 3, 16), -1, sizes=(4, 8, 4)),
    "v_remainder": Split((2, 7, 3, 5), 1, sizes=(2, -1, 1)),
    # Parts of size 0: an op with some empty outputs still runs for the others.
    "v_empty_first": Split((1, 3, 3, 6), 3, sizes=(0, 6)),
    "v_empty_middle": Split((2, 3, 4, 6), -1, sizes=(2, 0, 4)),
    "v_empty_remainder": Split((1, 4, 3, 5), 1, sizes=(4, -1)),
    "v_empty_axis0": Split((3, 2, 5), 0, sizes=(0, 3, 0)),
}

EMPTY_CASES = [name for name in CASES if "empty" in name]


def split_model(case: Split, seed: int = 0) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", case.shape)
    parts = b.split_v(x, case.sizes, case.axis) if case.sizes else b.split(x, case.axis, case.num)
    for p in parts:
        b.output(p)
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_split_parity(case: Split, runtime: str) -> None:
    r = check_parity(split_model(case), runtime, expect_delegated="all", atol=0, rtol=0)
    assert r.stats["invokes"] >= 1
    assert {d["op_name"] for d in r.decisions} == {"SPLIT_V" if case.sizes else "SPLIT"}


@pytest.mark.parametrize("name", ["c_3_odd", "c_4_neg", "batch_4", "v_c_odd", "v_c_vec4"])
def test_split_fp16(name: str, runtime: str) -> None:
    check_fp16(split_model(CASES[name]), runtime)


def test_split_between_convs_one_partition(runtime: str) -> None:
    # conv -> split -> conv per part -> concat -> conv: one partition.
    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 6, 5, 8))
    y = b.conv2d(x, b.rand((6, 3, 3, 8)), activation="RELU")
    parts = b.split(y, 3, 3)
    z = b.concat([b.conv2d(p, b.rand((3, 1, 1, 2))) for p in parts], 3)
    b.output(b.conv2d(z, b.rand((5, 1, 1, 9))))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_split_profile_names_its_kernels(runtime: str) -> None:
    for name, kernel in (("c_3_odd", "split_copy"), ("c_2_vec4", "split_copy4")):
        r = check_parity(split_model(CASES[name]), runtime, expect_delegated="all", profiling=True)
        assert kernel in {k.kernel for k in r.delegate.profile().kernels}


def _declined(model: bytes, runtime: str, **options: object) -> str:
    d = clgpu_delegate.load(partitioning="all", **options)
    make_interpreter(model, [d], runtime=runtime, reference=True)
    assert d.delegated_nodes() == [], d.decisions()
    return d.decisions()[0].reason


def test_runtime_axis_is_declined(runtime: str) -> None:
    from clgpu_delegate.modelgen.builder import tflite

    b = ModelBuilder()
    x = b.input("x", (1, 4, 4, 6))
    axis = b.input("axis", (), "int32")
    outs = b._op(
        tflite.BuiltinOperator.SPLIT,
        [axis, x],
        [(1, 4, 4, 3)] * 2,
        options="SplitOptions",
        NumSplits=2,
    )
    for o in outs:
        b.output(o)
    assert "axis is not a constant" in _declined(b.build(), runtime)


def test_runtime_sizes_are_declined(runtime: str) -> None:
    from clgpu_delegate.modelgen.builder import tflite

    b = ModelBuilder()
    x = b.input("x", (1, 4, 4, 6))
    sizes = b.input("sizes", (2,), "int32")
    outs = b._op(
        tflite.BuiltinOperator.SPLIT_V,
        [x, sizes, b._int_const(3, "axis")],
        [(1, 4, 4, 3)] * 2,
        options="SplitVOptions",
        NumSplits=2,
    )
    for o in outs:
        b.output(o)
    assert "size_splits is not a constant" in _declined(b.build(), runtime)


def test_int32_split_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder()
    for o in b.split(b.input("a", (2, 6), "int32"), 1, 2):
        b.output(o)
    r = check_parity(b.build(), runtime, expect_cpu="all", atol=0, rtol=0)
    assert "float32" in r.reason(0)


@pytest.mark.parametrize("name", EMPTY_CASES)
def test_split_v_empty_part_transfers(name: str, runtime: str, transfer: dict) -> None:
    check_parity(
        split_model(CASES[name]), runtime, expect_delegated="all", atol=0, rtol=0, **transfer
    )


@pytest.mark.parametrize("name", EMPTY_CASES)
def test_split_v_empty_part_fp16(name: str, runtime: str) -> None:
    check_fp16(split_model(CASES[name]), runtime)


def test_split_v_empty_part_inside_a_partition(runtime: str, transfer: dict) -> None:
    # conv -> SPLIT_V (0, 2, 4) -> CONCATENATION of all three parts -> conv; the empty part is
    # also a graph output, the others feed the concat only.
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 5, 4, 3))
    y = b.conv2d(x, b.rand((6, 3, 3, 3)), activation="RELU")
    parts = b.split_v(y, (0, 2, 4), 3)
    z = b.concat([parts[1], parts[0], parts[2]], 3)
    b.output(b.conv2d(z, b.rand((5, 1, 1, 6))))
    b.output(parts[0])
    r = check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1, **transfer)
    assert r.outputs[1].shape == (2, 5, 4, 0)


def test_empty_output_does_not_rebind_every_invoke(runtime: str, transfer: dict) -> None:
    # An empty partition output is never wrapped under zero-copy: whatever pointer TFLite
    # gives it, invokes after the first neither re-bind kernels nor look up programs.
    delegate = clgpu_delegate.load(**transfer)
    model = split_model(CASES["v_empty_first"])
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), 0)
    run(interp, inputs)
    first = delegate.stats()
    for _ in range(3):
        run(interp, inputs)
    stats = delegate.stats()
    assert stats.program_cache_hits == first.program_cache_hits, (first, stats)
    assert stats.invokes == 4


def test_split_over_the_largest_allocation_is_declined(runtime: str) -> None:
    # Chunks are boxes of output 0 only (runtime/split.h): a multi-output op cannot run in
    # them, so a SPLIT touching a tensor larger than one buffer stays on the CPU.
    model = split_model(Split((1, 16, 16, 8), 3))
    assert "cannot run in chunks" in _declined(model, runtime, max_alloc_bytes=4096)
