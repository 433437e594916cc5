"""Element-wise unary ops (src_cpp/ops/unary.cc) against stock TFLite CPU: every op, fp32 and
fp16 storage, odd sizes (the 4-wide path's tail), parameters (LEAKY_RELU's alpha, GELU's
approximation), chunks within a tiny largest allocation, and chains with a conv."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from parity import check_parity, random_inputs

from clgpu_delegate.modelgen import ModelBuilder

OPS = tflite.BuiltinOperator
# op -> (BuiltinOptions table and fields, or None; inputs must be positive)
UNARY = {
    "RELU": (None, False),
    "RELU6": (None, False),
    "RELU_N1_TO_1": (None, False),
    "RELU_0_TO_1": (None, False),
    "LEAKY_RELU": (("LeakyReluOptions", {"Alpha": 0.2}), False),
    "HARD_SWISH": (None, False),
    "LOGISTIC": (None, False),
    "TANH": (None, False),
    "ELU": (None, False),
    "GELU": (("GeluOptions", {"Approximate": False}), False),
    "GELU_TANH": (("GeluOptions", {"Approximate": True}), False),
    "EXP": (None, False),
    "LOG": (None, True),
    "SQRT": (None, True),
    "RSQRT": (None, True),
    "SQUARE": (None, False),
    "ABS": (None, False),
    "NEG": (None, False),
    "SIN": (None, False),
    "COS": (None, False),
}


def unary(b: ModelBuilder, name: str, x: int) -> int:
    options, _ = UNARY[name]
    code = getattr(OPS, "GELU" if name == "GELU_TANH" else name)
    table, fields = options or (None, {})
    return b._op(code, [x], [b.shape(x)], options=table, **fields)[0]


def unary_model(name: str, shape: tuple[int, ...]) -> bytes:
    b = ModelBuilder(seed=3)
    b.output(unary(b, name, b.input("x", shape)))
    return b.build()


def _inputs(name: str, shape: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    return [np.abs(x) + 0.05 if UNARY[name][1] else x]


@pytest.mark.parametrize("shape", [(2, 7, 5, 3), (13,)], ids=["4d", "odd_1d"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_parity(name: str, shape: tuple[int, ...], runtime: str) -> None:
    r = check_parity(
        unary_model(name, shape), runtime, _inputs(name, shape), expect_delegated="all"
    )
    assert r.stats["invokes"] == 1


@pytest.mark.parametrize("name", ["HARD_SWISH", "LOGISTIC", "GELU", "LOG", "SIN"])
def test_unary_fp16_storage(name: str, runtime: str) -> None:
    shape = (1, 9, 6, 5)
    check_parity(
        unary_model(name, shape),
        runtime,
        _inputs(name, shape),
        rtol=1e-2,
        atol=2e-2,
        expect_delegated="all",
        precision="fp16",
    )


@pytest.mark.parametrize("name", ["SIN", "COS"])
def test_sin_cos_of_large_arguments(name: str, runtime: str) -> None:
    # Angles far past 2 pi, as a positional or time encoding computes them: the kernel reduces
    # the range in full precision (no fast-math sin), so the values match the CPU's.
    rng = np.random.default_rng(5)
    x = (rng.uniform(-1, 1, (4, 257)) * np.logspace(0, 4, 257)).astype(np.float32)
    r = check_parity(unary_model(name, x.shape), runtime, [x], expect_delegated="all")
    np.testing.assert_allclose(r.outputs[0], getattr(np, name.lower())(x), atol=2e-6)


def test_unary_in_chunks_within_a_tiny_allocation(runtime: str) -> None:
    # 3 KB buffers: the 8 KB tensor is kept in pieces and the op runs in chunks.
    shape = (2, 16, 16, 4)
    r = check_parity(
        unary_model("HARD_SWISH", shape),
        runtime,
        _inputs("HARD_SWISH", shape),
        expect_delegated="all",
        max_alloc_bytes=3072,
    )
    assert r.delegate.memory()["chunked_ops"] >= 1


def test_conv_swish_chain_is_one_partition(runtime: str) -> None:
    # Swish as Keras converts it (LOGISTIC, then MUL by the input) stays split by MUL, an op
    # not claimed yet; the activations around it join the conv's partition.
    b = ModelBuilder(seed=5)
    x = b.input("x", (1, 10, 10, 3))
    y = b.conv2d(x, b.rand((8, 3, 3, 3)), b.rand((8,)))
    y = unary(b, "HARD_SWISH", y)
    y = unary(b, "RELU6", b.conv2d(y, b.rand((4, 1, 1, 8))))
    b.output(unary(b, "TANH", y))
    r = check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)
    assert [d["op_name"] for d in r.decisions] == [
        "CONV_2D",
        "HARD_SWISH",
        "CONV_2D",
        "RELU6",
        "TANH",
    ]


def test_unary_with_another_output_shape_stays_on_cpu(runtime: str) -> None:
    b = ModelBuilder(seed=6)
    x = b.input("x", (2, 3))
    b.output(b._op(OPS.RELU, [x], [(3, 2)])[0])
    model = b.build()
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    try:
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], random_inputs(it.get_input_details())[0])
        it.invoke()
    except RuntimeError:
        pass  # the runtime may refuse it itself; what matters is that we did not claim it
    assert d.decisions()[0]["reason"] == "output shape differs from the input's"
