"""FULLY_CONNECTED on int8 tensors against TFLite's int8 kernel (ruy), bit for bit: batches,
K not a multiple of 4 (the byte-wise A loads), keep_num_dims, no bias, fused activations,
per-channel and per-tensor weights."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CASES = [
    # input shape, outputs, bias, keep_num_dims, activation
    ((1, 64), 10, True, False, None),
    ((3, 37), 29, True, False, "RELU"),
    ((2, 5, 24), 7, False, True, "RELU6"),
    ((1, 2, 3, 16), 100, True, False, None),
    ((17, 130), 65, True, False, "RELU_N1_TO_1"),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("per_channel,pow2", [(True, False), (False, False), (True, True)])
def test_fully_connected_int8(runtime: str, case, per_channel: bool, pow2: bool) -> None:
    shape, n, bias, keep, act = case
    k = shape[-1]
    b = ModelBuilder(seed=n)
    x = b.input("x", shape)
    y = b.fully_connected(
        x, b.rand((n, k)), b.rand((n,), 0.3) if bias else None, activation=act, keep_num_dims=keep
    )
    b.output(y)
    model = quantize_model(
        b.build(), per_channel=per_channel, io="int8", seed=n, jitter=0.4, pow2_scales=pow2
    )
    # Power-of-two scales put exact ties in the multipliers' final shifts (ruy rounds them up).
    check_int8_parity(model, runtime, min_fraction=1.0 if pow2 else 0.999)
