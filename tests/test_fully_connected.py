"""FULLY_CONNECTED parity with stock TFLite CPU: 2-4-D inputs, keep_num_dims both ways,
activations, bias or none."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from parity import check_parity, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


class FC(NamedTuple):
    input: tuple[int, ...]
    units: int
    k: int  # weights (units, k)
    keep_num_dims: bool = False
    activation: str | None = None
    bias: bool = True


CASES = {
    "1d": FC((17,), 5, 17, activation="RELU"),
    "2d": FC((3, 17), 5, 17),
    "2d_batch1_k64_relu_nobias": FC((1, 64), 10, 64, activation="RELU", bias=False),
    "2d_k1": FC((4, 1), 3, 1, activation="RELU6"),
    "2d_k_smaller_than_row": FC((2, 12), 3, 6),  # flattened to (4, 6)
    "2d_wide": FC((2, 333), 31, 333, activation="RELU_N1_TO_1"),
    "3d_keep": FC((2, 3, 7), 9, 7, keep_num_dims=True, activation="RELU6"),
    "3d_flatten": FC((2, 3, 7), 9, 7),
    "4d_keep": FC((2, 2, 3, 5), 4, 5, keep_num_dims=True, activation="RELU_N1_TO_1"),
    "4d_flatten_nobias": FC((2, 2, 3, 5), 4, 5, bias=False),
    "4d_flatten_all": FC((1, 3, 3, 5), 11, 45, activation="RELU"),  # (1, 45)
    "2d_keep": FC((5, 13), 1, 13, keep_num_dims=True),
    # Row counts on both sides of the batched-GEMM thresholds, with tile remainders.
    "rows8_k1000": FC((8, 1000), 13, 1000, activation="RELU"),
    "rows8_k32": FC((8, 32), 8, 32),  # a squeeze-excite reduce at batch 8: 8 lanes of K
    "rows5_k9": FC((5, 9), 20, 9, activation="RELU6"),
    "rows9": FC((9, 50), 33, 50),
    "rows21_keep": FC((3, 7, 20), 70, 20, keep_num_dims=True, activation="RELU6"),
    "rows257": FC((257, 40), 65, 40, bias=False),
    # Every dimension a multiple of the GEMM tiles: the bounds-check-free (GEMM_EVEN) build.
    "rows64_whole_tiles": FC((64, 64), 96, 64, activation="RELU"),
    "rows512_whole_tiles": FC((512, 128), 256, 128),
    "rows300_keep": FC((2, 150, 24), 31, 24, keep_num_dims=True, activation="RELU_N1_TO_1"),
}


def fc_model(case: FC, seed: int = 0, fp16_weights: bool = False) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", case.input)
    w = b.rand((case.units, case.k), scale=math.sqrt(2.0 / case.k))
    bias = b.rand((case.units,), scale=0.5) if case.bias else None
    b.output(
        b.fully_connected(
            x,
            w,
            bias,
            activation=case.activation,
            keep_num_dims=case.keep_num_dims,
            fp16_weights=fp16_weights,
        )
    )
    return b.build()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_fully_connected_parity(case: FC, runtime: str) -> None:
    check_parity(fc_model(case), runtime, expect_delegated="all")


@pytest.mark.parametrize("activation", ["TANH", "SIGN_BIT"])
def test_fully_connected_unsupported_activation_stays_on_cpu(activation: str, runtime: str) -> None:
    # TFLite's CPU FULLY_CONNECTED rejects these activations at prepare: the delegate must
    # leave the node alone so the runtime reports the same error it reports without us.
    model = fc_model(FC((2, 6), 3, 6, activation=activation))
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    with pytest.raises(RuntimeError) as ref_err:
        ref.allocate_tensors()
    delegate = clgpu_delegate.load()
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    assert delegate.delegated_nodes() == []
    assert "activation" in delegate.decisions()[0].reason
    with pytest.raises(RuntimeError) as err:
        interp.allocate_tensors()
    assert str(err.value) == str(ref_err.value)


def test_fully_connected_classifier_head(runtime: str) -> None:
    # FC -> FC -> FC with different widths in one partition.
    b = ModelBuilder(seed=2)
    x = b.input("x", (3, 50))
    for units, act in ((37, "RELU"), (21, "RELU6"), (10, None)):
        k = b.shape(x)[-1]
        x = b.fully_connected(x, b.rand((units, k)), b.rand((units,), scale=0.1), activation=act)
    b.output(x)
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


# ---- weights computed at run time (a graph input, or an op's output) -------------------------

RUNTIME_CASES = ["2d", "2d_batch1_k64_relu_nobias", "3d_keep", "4d_flatten_nobias", "rows21_keep",
                 "rows64_whole_tiles"]


def runtime_weights_model(case: FC, produced: bool = False) -> bytes:
    b = ModelBuilder(seed=4)
    x = b.input("x", case.input)
    w = b.input("w", (case.units, case.k))
    if produced:
        w = b.mul(w, 0.5)  # computed on the device too: one partition
    bias = b.rand((case.units,), scale=0.5) if case.bias else None
    b.output(b.fully_connected(x, w, bias, activation=case.activation,
                               keep_num_dims=case.keep_num_dims))
    return b.build()


@pytest.mark.parametrize("case", RUNTIME_CASES)
def test_fully_connected_runtime_weights(case: str, runtime: str) -> None:
    check_parity(runtime_weights_model(CASES[case]), runtime, expect_delegated="all")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_fully_connected_weights_from_an_op(precision: str, runtime: str) -> None:
    tol = {"rtol": 1e-2, "atol": 1e-2} if precision == "fp16" else {}
    check_parity(runtime_weights_model(CASES["rows21_keep"], produced=True), runtime,
                 expect_delegated="all", expect_partitions=1, precision=precision, **tol)


def test_fully_connected_runtime_weights_in_chunks(runtime: str) -> None:
    # 512-byte buffers: the weights [70, 20] are cut by ranges of N, like uploaded ones.
    r = check_parity(runtime_weights_model(CASES["rows21_keep"]), runtime,
                     expect_delegated="all", max_alloc_bytes=512)
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_fully_connected_runtime_weights_resized(runtime: str) -> None:
    # K follows the weights the plan gets (no bias: N is free too), as on the CPU.
    model = runtime_weights_model(CASES["2d_batch1_k64_relu_nobias"])
    r = check_parity(model, runtime, expect_delegated="all")
    for shape in [(6, 32), (3, 16)]:
        ref = make_interpreter(model, None, runtime=runtime, reference=True)
        for it in (ref, r.interpreter):
            it.resize_tensor_input(it.get_input_details()[1]["index"], shape)
            it.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), shape[0])
        got = run(r.interpreter, inputs)
        compare(got, run(ref, inputs), 1e-4, None, f" (weights {shape})")
