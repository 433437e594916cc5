"""PAD, PADV2 and MIRROR_PAD (src_cpp/ops/pad.cc) against stock TFLite CPU: spatial padding as
Keras' ZeroPadding2D makes it, channels and batch, ranks 1 to 5, a pad value, both mirror modes
at their largest paddings, fp16 storage, a pad before a VALID conv, and what stays on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder

CASES = {
    "spatial_4d": ((1, 7, 6, 3), [[0, 0], [1, 1], [1, 1], [0, 0]]),
    "asymmetric_4d": ((2, 5, 4, 3), [[0, 0], [0, 1], [2, 0], [0, 0]]),
    "channels": ((1, 3, 4, 5), [[0, 0], [0, 0], [0, 0], [2, 3]]),
    "batch": ((2, 3, 2, 2), [[1, 2], [0, 0], [0, 0], [0, 0]]),
    "rank1": ((7,), [[3, 2]]),
    "rank2": ((4, 5), [[1, 0], [2, 2]]),
    "rank3": ((3, 4, 5), [[0, 1], [1, 0], [2, 1]]),
    "rank5": ((2, 3, 2, 3, 2), [[0, 1], [1, 0], [0, 0], [2, 1], [1, 1]]),
    "none": ((2, 3, 4), [[0, 0], [0, 0], [0, 0]]),
}


def _model(kind: str, shape: tuple[int, ...], pads: list[list[int]], mode: str = "") -> bytes:
    b = ModelBuilder(seed=1)
    x = b.input("x", shape)
    if kind == "PAD":
        y = b.pad(x, pads)
    elif kind == "PADV2":
        y = b.pad_v2(x, pads, -3.5)
    else:
        y = b.mirror_pad(x, pads, mode)
    b.output(y)
    return b.build()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", ["PAD", "PADV2"])
def test_pad_parity(kind: str, case: str, runtime: str) -> None:
    check_parity(_model(kind, *CASES[case]), runtime, expect_delegated="all")


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("case", ["spatial_4d", "rank2", "rank3"])
def test_mirror_pad_parity(case: str, mode: str, runtime: str) -> None:
    check_parity(_model("MIRROR_PAD", *CASES[case], mode), runtime, expect_delegated="all")


@pytest.mark.parametrize(("mode", "extra"), [("REFLECT", 0), ("SYMMETRIC", 1)])
def test_mirror_pad_at_its_largest_paddings(mode: str, extra: int, runtime: str) -> None:
    shape = (1, 4, 5, 2)
    pads = [[0, 0], [3 + extra, 3 + extra], [4 + extra, 4 + extra], [0, 0]]
    check_parity(_model("MIRROR_PAD", shape, pads, mode), runtime, expect_delegated="all")


@pytest.mark.parametrize("kind", ["PAD", "PADV2"])
def test_pad_fp16_storage(kind: str, runtime: str) -> None:
    model = _model(kind, *CASES["spatial_4d"])
    check_parity(model, runtime, rtol=1e-2, atol=2e-2, expect_delegated="all", precision="fp16")


def test_pad_then_valid_conv_is_one_partition(runtime: str) -> None:
    # Keras' ZeroPadding2D before a strided conv, as in ResNet50V2.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 9, 9, 3))
    y = b.pad(b.conv2d(x, b.rand((4, 1, 1, 3))), [[0, 0], [1, 1], [1, 1], [0, 0]])
    b.output(b.conv2d(y, b.rand((5, 3, 3, 4)), stride=2, padding="VALID", activation="RELU"))
    check_parity(b.build(), runtime, expect_delegated="all", expect_partitions=1)


def test_pad_with_runtime_paddings_stays_on_cpu(runtime: str) -> None:
    import tflite

    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 4, 4, 2))
    p = b.input("p", (4, 2), "int32")
    y = b._op(tflite.BuiltinOperator.PAD, [x, p], [(1, 6, 6, 2)], options="PadOptions")[0]
    b.output(y)
    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    inputs = [np.ones((1, 4, 4, 2), np.float32), pads]
    r = check_parity(b.build(), runtime, inputs, expect_cpu="all")
    assert "paddings" in r.reason(0) and "constant" in r.reason(0), r.reason(0)
