"""Tensors, weights and work larger than the device's largest allocation (issue #6).

With `max_alloc_bytes` lowered to a few KB, activations are kept in pieces and every op that
touches one (or whose weights or scratch would not fit one buffer) runs in chunks. Each case
must match stock TFLite CPU with every node delegated and the memory report showing the split,
so none can pass by falling back to the CPU. On PoCL, a convolution whose output exceeds the
driver's own 1 GiB limit runs the same way."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from parity import CONV_ALGORITHMS, ParityResult, check_parity, compare, random_inputs, run
from test_add import Add, add_model
from test_concat import Concat, concat_model
from test_conv2d import Conv, conv_model, set_blocked_knobs, set_fused_knobs
from test_depthwise_conv2d import Depthwise, depthwise_model
from test_fully_connected import FC, fc_model
from test_pool import Pool, pool_model
from test_resize import Resize, resize_model
from test_transpose import transpose_model

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

FP16_RTOL = 1e-2  # as tests/test_fp16.py: of each output's range


def check_split(
    model: bytes,
    runtime: str,
    limit: int,
    precision: str = "fp32",
    tensors_split: bool = True,
    **options: Any,
) -> ParityResult:
    """Parity with every node delegated, and proof that ops ran in chunks and (unless only
    weights are over the limit) that tensors were kept in pieces."""
    tolerance: dict[str, float] = {}
    if precision == "fp16":
        ref = make_interpreter(model, runtime=runtime, reference=True)
        ref.allocate_tensors()
        peak = max(
            float(np.abs(o).max(initial=0.0))
            for o in run(ref, random_inputs(ref.get_input_details(), 0))
        )
        tolerance = {"rtol": FP16_RTOL, "atol": FP16_RTOL * max(peak, 1e-3)}
    r = check_parity(
        model,
        runtime,
        expect_delegated="all",
        max_alloc_bytes=limit,
        precision=precision,
        **tolerance,
        **options,
    )
    mem = r.delegate.memory()
    if tensors_split:
        assert mem["split_tensors"] >= 1 and mem["split_pieces"] > mem["split_tensors"], mem
    assert mem["chunked_ops"] >= 1 and mem["chunks"] > mem["chunked_ops"], mem
    assert mem["chunk_staging_bytes"] > 0, mem
    for p in mem["partitions"]:
        assert p["allocated_bytes"] <= limit * max(p["buffers"], 1), p
    return r


# ---- CONV_2D: every algorithm on chunks of rows, columns, images and output channels ----


CONV_CASES = {
    "3x3_batch2": Conv((2, 13, 11, 6), 12, (3, 3), activation="RELU"),
    "3x3_s2_nobias": Conv((1, 21, 17, 5), 8, (3, 3), stride=2, bias=False),
    "3x3_d2_valid": Conv((1, 18, 15, 7), 9, (3, 3), dilation=2, padding="VALID"),
    # Winograd tiles (2 and 4) divide neither 15 nor 13; 17 and 9 channels.
    "3x3_ragged_tiles": Conv((2, 15, 13, 17), 9, (3, 3), activation="RELU6"),
    "1x1_batch2": Conv((2, 12, 10, 16), 24, (1, 1), padding="VALID"),
    "5x5_s2": Conv((1, 19, 16, 4), 6, (5, 5), stride=2, activation="RELU_N1_TO_1"),
    # Weights (64 x 3 x 3 x 40 floats = 92 KB) far over the limit: output channels split.
    "3x3_weights_over": Conv((1, 6, 7, 40), 64, (3, 3), activation="RELU"),
}


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS)
@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_conv2d_split(case: Conv, algorithm: str, runtime: str) -> None:
    r = check_split(conv_model(case), runtime, 4096, conv_algorithm=algorithm)
    assert "runs in chunks" in r.decisions[0]["note"]


@pytest.mark.parametrize("algorithm", CONV_ALGORITHMS[1:])
def test_conv2d_split_fp16(algorithm: str, runtime: str) -> None:
    check_split(
        conv_model(CONV_CASES["3x3_ragged_tiles"]), runtime, 2048, "fp16", conv_algorithm=algorithm
    )


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_conv2d_split_blocked_gpu_knobs(
    case: Conv, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The GPU table's blocks (8 pixels x 16 channels, 32 x 4 groups) on chunks narrower than them.
    set_blocked_knobs(monkeypatch, "8,16,32,4")
    check_split(conv_model(case), runtime, 4096, conv_algorithm="direct_blocked")


def test_conv2d_split_weights_only(runtime: str) -> None:
    # Activations fit; only the filter (48 KB) does not: output channels in chunks.
    case = Conv((1, 5, 5, 32), 40, (3, 3))
    r = check_parity(conv_model(case), runtime, expect_delegated="all", max_alloc_bytes=16384)
    mem = r.delegate.memory()
    assert mem["split_tensors"] == 0 and mem["chunked_ops"] == 1 and mem["chunks"] >= 3, mem


@pytest.mark.parametrize("knobs", [None, "16,32,4,2,2,1"], ids=["table", "gpu"])
def test_conv2d_split_winograd4_fused_weights(
    knobs: str | None, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fused filter (40 x 32 x 36 floats, 184 KB) over the limit: it still runs, in chunks of
    # output channels whose blocks shrink to fit, each its own filter layout.
    if knobs:
        set_fused_knobs(monkeypatch, knobs)
    case = Conv((1, 9, 10, 32), 40, (3, 3), activation="RELU")
    r = check_parity(
        conv_model(case),
        runtime,
        expect_delegated="all",
        conv_algorithm="winograd4_fused",
        max_alloc_bytes=16384,
        profiling=True,
    )
    mem = r.delegate.memory()
    assert mem["chunked_ops"] == 1 and mem["chunks"] >= 3, mem
    ran = {k.kernel for k in r.delegate.profile().kernels} - {"copy_in", "copy_out"}
    assert ran == {"conv2d_winograd4_fused"}, ran


# ---- DEPTHWISE_CONV_2D: channel ranges of whole multiplier groups ----

DW_CASES = {
    "3x3_m1_batch2": Depthwise((2, 14, 12, 8), 1, (3, 3), activation="RELU6"),
    "3x3_s2_m2": Depthwise((1, 17, 15, 6), 2, (3, 3), stride=2),
    "5x5_d2_m2_valid": Depthwise((1, 16, 15, 5), 2, (5, 5), dilation=2, padding="VALID"),
    # 1 x 3 x 3 x 1024 filter = 36 KB: channels split, two outputs per input channel.
    "3x3_m2_weights_over": Depthwise((1, 4, 4, 512), 2, (3, 3), activation="RELU"),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", DW_CASES.values(), ids=DW_CASES.keys())
def test_depthwise_split(case: Depthwise, precision: str, runtime: str) -> None:
    check_split(depthwise_model(case), runtime, 4096 if precision == "fp32" else 2048, precision)


def test_chain_in_shared_buffers(monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    # Activations in whole shared buffers (NVIDIA's path) rather than views of one arena.
    monkeypatch.setenv("CLGPU_ARENA", "shared")
    r = check_split(chain_model(), runtime, 4096, zero_copy="off")
    mem = r.delegate.memory()
    assert mem["partitions"][0]["buffers"] >= 1 and mem["chunked_ops"] >= 3, mem


# ---- FULLY_CONNECTED: rows of M, ranges of N (the weights) ----

FC_CASES = {
    # Batch 1: a row of the input must fit, so only the weights (252 KB) are split.
    "batch1_weights_over": FC((1, 700), 90, 700, activation="RELU"),
    "batch24": FC((24, 300), 70, 300),
    "3d_keep": FC((3, 19, 64), 40, 64, keep_num_dims=True, activation="RELU6"),
    "4d_flatten": FC((2, 5, 7, 48), 33, 48, bias=False),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", FC_CASES.values(), ids=FC_CASES.keys())
def test_fully_connected_split(case: FC, precision: str, runtime: str) -> None:
    limit = 8192 if precision == "fp32" else 4096
    check_split(fc_model(case), runtime, limit, precision, tensors_split=case.input[0] > 1)


def test_fully_connected_split_k(runtime: str) -> None:
    # Split-K GEMM (forced) needs scratch per chunk too.
    check_split(fc_model(FC_CASES["batch24"]), runtime, 8192, gemm_splits=3)


# ---- ADD: boxes of the output; broadcast operands pass whole or by their own box ----

ADD_CASES = {
    "same_4d": Add((2, 13, 11, 6), (2, 13, 11, 6), "RELU"),
    "channel_bias_const": Add((2, 13, 11, 6), (6,), const_b=True),
    "both_broadcast": Add((1, 13, 1, 6), (2, 1, 11, 1), "RELU6"),
    "large_const_first": Add((3, 17, 19), (3, 17, 19), const_b=True, const_first=True),
    "rank5": Add((2, 3, 4, 5, 6), (1, 3, 1, 5, 1), "RELU_N1_TO_1"),
    "rank6": Add((2, 3, 2, 4, 3, 5), (2, 1, 2, 1, 3, 1)),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", ADD_CASES.values(), ids=ADD_CASES.keys())
def test_add_split(case: Add, precision: str, runtime: str) -> None:
    check_split(add_model(case), runtime, 1024 if precision == "fp32" else 512, precision)


# ---- TRANSPOSE: a box of the output reads the permuted box of the input ----

TRANSPOSE_CASES = [
    ((37, 45), (1, 0)),
    ((3, 40, 33), (0, 2, 1)),
    ((2, 9, 13, 10), (0, 3, 1, 2)),
    ((2, 3, 5, 4, 7), (4, 0, 3, 1, 2)),
    ((2, 3, 3, 2, 4, 5), (5, 4, 3, 2, 1, 0)),
    ((2, 3, 3, 2, 4, 5), (0, 2, 1, 4, 3, 5)),
]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(
    ("shape", "perm"),
    TRANSPOSE_CASES,
    ids=[f"{'x'.join(map(str, s))}-{''.join(map(str, p))}" for s, p in TRANSPOSE_CASES],
)
def test_transpose_split(
    shape: tuple[int, ...], perm: tuple[int, ...], precision: str, runtime: str
) -> None:
    check_split(
        transpose_model(shape, perm), runtime, 1024 if precision == "fp32" else 512, precision
    )


# ---- CONCATENATION: boxes of the [outer, axis, inner] view; each input gives its part ----

CONCAT_CASES = {
    "channels_3": Concat(((2, 11, 9, 5), (2, 11, 9, 8), (2, 11, 9, 3)), 3),
    "rows_const": Concat(((1, 13, 12, 4), (1, 9, 12, 4)), 1, const=(1,)),
    "batch_5": Concat(tuple((n, 7, 6, 5) for n in (1, 2, 1, 3, 1)), 0),
    "rank2_neg": Concat(((40, 17), (40, 30)), -1),
    # More inputs than one launch takes, some of them empty in a chunk's box.
    "channels_10": Concat(tuple((2, 11, 9, (3, 4, 8, 1, 5)[i % 5]) for i in range(10)), 3),
    "rows_9_vec4": Concat(tuple((1, 2 + i, 12, 4) for i in range(9)), 1, const=(3,)),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", CONCAT_CASES.values(), ids=CONCAT_CASES.keys())
def test_concat_split(case: Concat, precision: str, runtime: str) -> None:
    check_split(concat_model(case), runtime, 1024 if precision == "fp32" else 512, precision)


# ---- pools: the conv window arithmetic on boxes of rows, columns, images and channels ----

POOL_CASES = {
    "3x3_s2_same": Pool((2, 23, 19, 8), 3, 2, "SAME", "RELU"),
    "2x2_s2_valid_c5": Pool((1, 22, 21, 5), 2, 2),
    "3x3_s1_same_c3": Pool((2, 17, 15, 3), 3, 1, "SAME"),
    "rect_over_stride": Pool((1, 20, 18, 6), (3, 2), (1, 3), "SAME", "RELU6"),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES.values(), ids=POOL_CASES.keys())
def test_pool_split(case: Pool, kind: str, precision: str, runtime: str) -> None:
    check_split(pool_model(case, kind), runtime, 1024 if precision == "fp32" else 512, precision)


# ---- resizes: a box of the output reads the input rows and columns it samples ----

RESIZE_CASES = {
    "up_c4": Resize((2, 9, 11, 4), (23, 25)),
    "down_c3": Resize((1, 29, 27, 3), (11, 10)),
    "mixed_c5": Resize((1, 8, 30, 5), (21, 13)),
}
RESIZE_FLAGS = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(("align", "half"), RESIZE_FLAGS, ids=["plain", "align", "half"])
@pytest.mark.parametrize("kind", ["nearest", "bilinear"])
@pytest.mark.parametrize("case", RESIZE_CASES.values(), ids=RESIZE_CASES.keys())
def test_resize_split(
    case: Resize, kind: str, align: bool, half: bool, precision: str, runtime: str
) -> None:
    model = resize_model(case, kind, align, half)
    check_split(model, runtime, 1024 if precision == "fp32" else 512, precision)


# ---- a partition whose split intermediates flow from op to op ----


def chain_model() -> bytes:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 23, 19, 6))
    y = b.conv2d(x, b.rand((10, 3, 3, 6), scale=0.3), b.rand((10,)), activation="RELU")
    y = b.add(y, b.rand((10,)))
    y = b.conv2d(y, b.rand((8, 3, 3, 10), scale=0.2), b.rand((8,)), stride=2)
    b.output(b.transpose(y, (0, 3, 1, 2)))
    return b.build()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_chain_of_split_ops_in_one_partition(
    precision: str, transfer: dict[str, str], runtime: str
) -> None:
    limit = 2048 if precision == "fp32" else 1024
    r = check_split(chain_model(), runtime, limit, precision, expect_partitions=1, **transfer)
    mem = r.delegate.memory()
    assert mem["chunked_ops"] == 4 and mem["split_tensors"] >= 4, mem
    # A second invoke with new inputs reuses pieces, staging and chunk kernels.
    ref = make_interpreter(chain_model(), None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 5)
    tol = (1e-4, None) if precision == "fp32" else (FP16_RTOL, FP16_RTOL * 10)
    compare(run(r.interpreter, inputs), run(ref, inputs), *tol)


def test_profile_attributes_chunk_copies_to_their_node(runtime: str) -> None:
    d = clgpu_delegate.load(partitioning="all", profiling=True, max_alloc_bytes=2048)
    it = make_interpreter(chain_model(), [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    inputs = random_inputs(it.get_input_details(), 0)
    for _ in range(2):
        run(it, inputs)
    prof = d.profile()
    names = {(k.node, k.kernel) for k in prof.kernels}
    assert {k for _, k in names} >= {"copy_in", "copy_out"}, names
    assert set(prof.nodes()) == {x["node"] for x in d.decisions()}
    # Work goes to a kernel, not a copy.
    assert all(k.flops == 0 for k in prof.kernels if k.kernel.startswith("copy"))
    assert sum(k.flops for k in prof.kernels if k.op == "CONV_2D") > 0
    per_invoke = sum(p.kernels_per_invoke for p in prof.partitions)
    assert sum(k.count for k in prof.kernels) == 2 * per_invoke


def test_capture_tensors_reads_pieces(runtime: str) -> None:
    model = conv_model(CONV_CASES["3x3_batch2"])
    r = check_split(model, runtime, 4096, capture_tensors=True)
    out = r.interpreter.get_output_details()[0]["index"]
    np.testing.assert_array_equal(r.delegate.captured()[out], r.outputs[0])


def test_resize_to_a_larger_input_plans_chunks_again(runtime: str) -> None:
    case = Conv((1, 8, 8, 4), 6, (3, 3))
    model = conv_model(case)
    d = clgpu_delegate.load(partitioning="all", max_alloc_bytes=4096)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    for interp in (it, ref):
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], [2, 20, 17, 4])
        interp.allocate_tensors()
    inputs = random_inputs(ref.get_input_details(), 3)
    compare(run(it, inputs), run(ref, inputs), 1e-4, None)
    assert d.memory()["chunked_ops"] == 1 and d.stats()["invokes"] == 1


def test_resize_beyond_what_pieces_can_hold_raises(runtime: str) -> None:
    # Claimed at 2x3x4; resized so far that 64-byte pieces would number in the tens of
    # thousands: allocate_tensors() raises (naming the tensor), nothing crashes.
    b = ModelBuilder()
    b.output(b.add(b.input("a", (2, 3, 4)), b.input("b", (2, 3, 4))))
    d = clgpu_delegate.load(partitioning="all", max_alloc_bytes=64)
    it = make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    assert d.delegated_nodes() == [0]
    for x in it.get_input_details():
        it.resize_tensor_input(x["index"], [1, 1000, 1000])
    with pytest.raises(RuntimeError, match="buffers"):
        it.allocate_tensors()


# ---- what cannot be chunked stays on the CPU, with the reason ----


def test_one_input_row_over_the_limit_stays_on_cpu(runtime: str) -> None:
    # One output needs a 1000-float input row: 4000 bytes over a 2048-byte limit.
    r = check_parity(
        fc_model(FC((4, 1000), 3, 1000)), runtime, expect_cpu="all", max_alloc_bytes=2048
    )
    assert "cannot run in chunks that fit" in r.reason(0), r.reason(0)


def test_conv_window_over_the_limit_stays_on_cpu_next_to_a_delegated_node(runtime: str) -> None:
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 6, 6, 300))
    y = b.conv2d(x, b.rand((4, 3, 3, 300), scale=0.05))  # one output reads 3x3x300 floats
    b.output(b.add(y, b.rand((4,))))
    r = check_parity(b.build(), runtime, expect_delegated={1}, expect_cpu={0}, max_alloc_bytes=3000)
    assert "largest allocation" in r.reason(0), r.reason(0)


@pytest.mark.parametrize("limit", [1, 3])
def test_a_limit_below_one_element_leaves_everything_on_cpu(limit: int, runtime: str) -> None:
    r = check_parity(chain_model(), runtime, expect_cpu="all", max_alloc_bytes=limit)
    assert all("allocation" in d["reason"] for d in r.decisions), r.decisions


def test_a_tiny_limit_gives_many_chunks_or_the_cpu_never_wrong_output(runtime: str) -> None:
    # 20 bytes: the convolutions' windows do not fit (CPU); ADD and TRANSPOSE run in
    # chunks of a few elements.
    r = check_parity(chain_model(), runtime, expect_cpu={0, 2}, max_alloc_bytes=20)
    assert r.delegate.memory()["chunks"] > 1000


# ---- PoCL's own limit: an output over 1 GiB, no override ----

POCL_CODE = """
import json, sys, time
import numpy as np
import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter

dev = clgpu_delegate.load(partitioning="all").device
shape, oc = (1, 4096, 4096, 8), 17
out_bytes = 4 * math.prod(shape[:3]) * oc
b = ModelBuilder(seed=11)
x = b.input("x", shape)
b.output(b.conv2d(x, b.rand((oc, 1, 1, shape[3]), scale=0.3), b.rand((oc,)), padding="VALID"))
model = b.build()
inp = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)

ref = make_interpreter(model, None, reference=True)
ref.allocate_tensors()
ref.set_tensor(ref.get_input_details()[0]["index"], inp)
t = time.time(); ref.invoke(); t_cpu = time.time() - t
expected = ref.get_tensor(ref.get_output_details()[0]["index"])
del ref

d = clgpu_delegate.load(partitioning="all")
it = make_interpreter(model, [d], reference=True)
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], inp)
t = time.time(); it.invoke(); t_gpu = time.time() - t
got = it.tensor(it.get_output_details()[0]["index"])()  # a view: no second copy
err = 0.0
for i in range(0, shape[1], 512):  # in slices: no full-size temporaries
    err = max(err, float(np.abs(got[:, i:i + 512] - expected[:, i:i + 512]).max()))
print(json.dumps({"max_alloc": dev.max_alloc_bytes, "device": dev.name, "out_bytes": out_bytes,
                  "peak": float(np.abs(expected).max()), "err": err, "t_cpu": t_cpu,
                  "t_gpu": t_gpu, "delegated": d.delegated_nodes(),
                  "memory": d.memory().to_dict()}))
"""


def test_pocl_conv_output_over_its_1gib_limit(run_python) -> None:
    if "Portable Computing Language" not in clgpu_delegate.load().device.platform:
        pytest.skip("needs PoCL, whose memory limit sets its largest allocation")
    # POCL_MEMORY_LIMIT=4 (GiB of device memory) gives PoCL's 1 GiB largest allocation
    # whatever the machine has (here 4 GiB by default); the output, 1,140,850,688 bytes
    # (1.06 GiB), then exceeds the driver's own limit.
    res = run_python("import math\n" + POCL_CODE, env={"POCL_MEMORY_LIMIT": "4"}, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    print(r)
    assert r["max_alloc"] == 1 << 30 and r["out_bytes"] > r["max_alloc"], r
    assert r["delegated"] == [0], r
    mem = r["memory"]
    assert mem["split_tensors"] == 1 and mem["chunked_ops"] == 1, mem
    assert r["err"] <= 1e-5 * max(r["peak"], 1.0), r
