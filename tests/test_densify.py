"""DENSIFY of sparse constants folded at Prepare (graph/sparse.cc, FoldConstantDensifies in
src_cpp/delegate/claim.cc) against stock TFLite CPU: the formats of TFLite's schema (dense and
CSR levels, traversal orders, blocks, 8/16/32-bit index arrays), FLOAT32 and FLOAT16 values, the
chain DENSIFY -> DEQUANTIZE -> CONV_2D that MediaPipe's pose_detection uses 38 times, and where
the folded nodes go: with their consumers, in their partition, or on the CPU with a CPU reader."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parity import check_parity, cpu_op

from clgpu_delegate.modelgen import ModelBuilder


def pruned(rng: np.random.Generator, shape: tuple[int, ...], keep: float = 0.4) -> np.ndarray:
    w = rng.standard_normal(shape).astype(np.float32)
    w[rng.random(shape) > keep] = 0.0
    return w


# name: sparse_const keyword arguments for a (8, 1, 1, 12) conv filter
FORMATS: dict[str, dict[str, Any]] = {
    "csr_last": {},  # pose_detection's: dense, dense, dense, CSR
    "csr_first_and_last": {"csr_levels": [0, 3]},
    "traversal_permuted": {"traversal_order": [3, 0, 1, 2], "csr_levels": [1]},
    "blocked_channels": {"block_map": [3], "block_size": [4], "csr_levels": [3]},
    "blocked_two_axes": {"block_map": [0, 3], "block_size": [2, 3], "csr_levels": [1, 3]},
    "int32_indices": {"csr_levels": [0, 3], "index_type": "int32"},
    "uint16_indices": {"index_type": "uint16"},
    "all_dense": {"csr_levels": []},
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fp16", [False, True], ids=["fp32_values", "fp16_values"])
def test_sparse_conv_weights(fmt: str, fp16: bool, runtime: str) -> None:
    rng = np.random.default_rng(1)
    b = ModelBuilder(seed=1)
    x = b.input("x", (1, 5, 6, 12))
    w = b.sparse_const(pruned(rng, (8, 1, 1, 12)), fp16=fp16, **FORMATS[fmt])
    b.output(b.conv2d(x, w, b.rand((8,)), activation="RELU"))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_sparse_fully_connected_weights(runtime: str) -> None:
    # TFLite's sparse FC format: 2-D weights in 1x4 blocks, the blocked columns compressed.
    rng = np.random.default_rng(2)
    b = ModelBuilder(seed=2)
    x = b.input("x", (3, 16))
    w = b.sparse_const(pruned(rng, (10, 16)), block_map=[1], block_size=[4], csr_levels=[1])
    b.output(b.fully_connected(x, w, b.rand((10,))))
    check_parity(b.build(), runtime, expect_delegated="all")


def pose_like(n_blocks: int, fp16: bool = True, seed: int = 3) -> bytes:
    """pose_detection's pattern: 1x1 convs whose fp16 weights are sparse (DENSIFY ->
    DEQUANTIZE), between depthwise convs with fp16 weights (DEQUANTIZE)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(seed=seed)
    y = b.input("x", (1, 12, 12, 8))
    for _ in range(n_blocks):
        dw = b.depthwise_conv2d(y, b.rand((1, 3, 3, 8)), b.rand((8,)), fp16_weights=fp16)
        w = b.sparse_const(pruned(rng, (8, 1, 1, 8)), fp16=fp16)
        y = b.add(b.conv2d(dw, w, b.rand((8,))), y, "RELU")
    b.output(y)
    return b.build()


def test_pose_detection_chain_is_one_partition(runtime: str) -> None:
    r = check_parity(pose_like(6), runtime, expect_delegated="all", expect_partitions=1)
    ops = {d["op_name"] for d in r.decisions}
    assert {"DENSIFY", "DEQUANTIZE", "CONV_2D"} <= ops, ops


def test_pose_detection_chain_fp16_storage(runtime: str) -> None:
    check_parity(
        pose_like(3),
        runtime,
        rtol=1e-2,
        atol=2e-2,
        expect_delegated="all",
        expect_partitions=1,
        precision="fp16",
    )


def test_folded_nodes_follow_their_consumers(runtime: str) -> None:
    # A CPU op splits the graph in two partitions. Each DENSIFY (and DEQUANTIZE) is claimed only
    # in the partition of the conv reading it; TFLite would group one with no run-time input
    # into the first partition, so there it stays on the CPU instead (claim.h says why).
    rng = np.random.default_rng(4)
    b = ModelBuilder(seed=4)
    y = b.input("x", (1, 6, 6, 8))
    for i in range(2):
        w = b.sparse_const(pruned(rng, (8, 1, 1, 8)), fp16=True)
        y = b.conv2d(y, w, b.rand((8,)), activation="RELU")
        if i == 0:
            y = cpu_op(b, y)
    b.output(y)
    r = check_parity(b.build(), runtime, expect_delegated={0, 1, 2, 6}, expect_partitions=2)
    # Node order: DENSIFY, DEQUANTIZE, CONV_2D, CUMSUM, DENSIFY, DEQUANTIZE, CONV_2D.
    part = {n: k for k, p in enumerate(r.partitions) for n in p}
    assert part[0] == part[1] == part[2] != part[6], r.partitions
    for n in (4, 5):
        assert r.reason(n).startswith("its consumers run in another partition"), r.reason(n)


def test_densify_read_by_a_cpu_op_stays_on_cpu(runtime: str) -> None:
    rng = np.random.default_rng(5)
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 4, 4, 6))
    w = b.sparse_const(pruned(rng, (6, 1, 1, 6)))
    y = b.conv2d(x, w, b.rand((6,)))
    b.output(y)
    b.output(cpu_op(b, w))
    r = check_parity(b.build(), runtime, expect_delegated={"CONV_2D"})
    assert "also read by an op that stays on the CPU" in r.reason(0), r.reason(0)


@pytest.mark.parametrize(
    "damage", ["index_out_of_range", "values_short"], ids=["bad_index", "short_values"]
)
def test_metadata_the_expansion_refuses_stays_on_the_cpu(damage: str, runtime: str) -> None:
    # TFLite's DENSIFY writes where a CSR index says, past its row (here still inside its output;
    # past it on a fuzzed pose_detection, where evaluating it for the delegate's constant fold
    # corrupted the fold's memory), and reads on past a short values buffer. The delegate's own
    # expansion refuses such metadata: the DENSIFY and its reader run on the CPU as they are.
    rng = np.random.default_rng(6)
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 4, 4, 8))
    w = b.sparse_const(pruned(rng, (6, 1, 1, 8), keep=0.6), fp16=True)
    sparse = next(t for t in b._tensors if getattr(t, "sparsity", None) is not None)
    csr = sparse.sparsity.levels[-1]
    if damage == "index_out_of_range":
        csr.indices[csr.segments[1] - 1] = 9  # row 0's last value, at column 9 of 8
    else:
        sparse.data = sparse.data[:-1]  # one FLOAT16 value fewer than the segments count
    b.output(b.conv2d(x, w, b.rand((6,))))
    r = check_parity(b.build(), runtime, expect_cpu={"DENSIFY", "DEQUANTIZE", "CONV_2D"})
    why = "a CSR index is out of range" if damage == "index_out_of_range" else "more values than"
    assert why in r.reason(0), r.reason(0)
