"""Randomized int8 parity: seeded random graphs of the int8 ops the delegate claims (CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV, ADD, SUB, MUL, pools, MEAN, CONCATENATION, PAD,
RESHAPE, the table ops LOGISTIC / TANH / HARD_SWISH / RELU family / LEAKY_RELU, MUL by a scalar,
swish and squeeze-excite blocks, RESIZE, the moving ops, SOFTMAX heads), quantized by
clgpu_delegate.modelgen.quantize_model (per-channel or per-tensor weights, jittered and
power-of-two scales, int8 or float I/O), against stock TFLite's int8 kernels in both runtimes.

Each case: every node delegated, no element more than one quantum off. Over all cases (the last
test): >= 99.9 % of elements bit-exact. CLGPU_INT8_CASES=N changes the number of cases;
CLGPU_INT8_SEED=S runs one seed in both runtimes and precisions.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
import tflite
from conftest import RUNTIMES
from int8_parity import QuantStats, check_int8_parity

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

CI_CASES = 500
BASE_SEED = 7000
ACTIVATIONS = (None, "RELU", "RELU6", "RELU_N1_TO_1")
STATS = QuantStats()


def _window_fits(size: int, k: int, stride: int, dilation: int = 1) -> bool:
    return size >= (k - 1) * dilation + 1


def _activation(b: ModelBuilder, y: int, rng: np.random.Generator, ops: list[str]) -> int:
    """A standalone activation (an int8 table op)."""
    name = str(rng.choice(["logistic", "tanh", "hard_swish", "relu", "relu6", "leaky_relu"]))
    ops.append(name)
    if name == "leaky_relu":
        alpha = float(rng.uniform(0.05, 0.5))
        code = tflite.BuiltinOperator.LEAKY_RELU
        return b._op(code, [y], [b.shape(y)], options="LeakyReluOptions", Alpha=alpha)[0]
    return int(getattr(b, name)(y))


def _move(b: ModelBuilder, y: int, rng: np.random.Generator, ops: list[str]) -> int:
    """An op that only moves values, keeping a 4-D NHWC tensor."""
    n, h, w, c = b.shape(y)
    name = str(rng.choice(["transpose", "strided_slice", "tile", "split_concat", "resize"]))
    ops.append(name)
    if name == "transpose":
        return b.transpose(y, (0, 2, 1, 3))
    if name == "strided_slice":
        return b.strided_slice(y, [0, h // 3, 0, 0], [n, h, w, c], [1, 1, 2 if w > 2 else 1, 1])
    if name == "tile":
        return b.tile(y, (1, 1, 2, 1)) if w < 8 else b.tile(y, (1, 1, 1, 2))
    if name == "split_concat" and c > 1:
        parts = b.split_v(y, [1, -1], 3)
        return b.concat(parts[::-1], axis=3)
    size = (int(rng.integers(2, 13)), int(rng.integers(2, 13)))
    align, half = [(False, False), (True, False), (False, True)][int(rng.integers(3))]
    bilinear = rng.random() < 0.5
    ops[-1] = f"resize {'bilinear' if bilinear else 'nearest'} {size} align={align} half={half}"
    resize = b.resize_bilinear if bilinear else b.resize_nearest
    return resize(y, size, align_corners=align, half_pixel_centers=half)


def _step(b: ModelBuilder, y: int, rng: np.random.Generator, ops: list[str]) -> int:
    """One random op after `y` (4-D NHWC), recorded in `ops`."""
    n, h, w, c = b.shape(y)
    kind = str(
        rng.choice(
            [
                "conv",
                "dw",
                "add",
                "pool",
                "concat",
                "pad",
                "reshape",
                "mul",
                "act",
                "swish",
                "se",
                "move",
                "tconv",
            ]
        )
    )
    if kind == "act":
        return _activation(b, y, rng, ops)
    if kind == "move":
        return _move(b, y, rng, ops)
    if kind == "swish":
        ops.append("swish")
        return b.mul(y, b.logistic(y))
    if kind == "se":
        # squeeze-excite: the mean over H, W scales the channels (a broadcast MUL).
        keep = rng.random() < 0.7
        m = b.mean(y, [1, 2], keep_dims=keep)
        if not keep:
            m = b.reshape(m, (n, 1, 1, c))
        m = b.conv2d(m, b.rand((c, 1, 1, c)), b.rand((c,), 0.2), activation="RELU")
        ops.append(f"squeeze-excite keep_dims={keep}")
        return b.mul(y, b.logistic(m))
    if kind == "tconv":
        k, stride = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        oc = int(rng.integers(1, 17))
        pad = "SAME" if rng.random() < 0.6 else "VALID"
        act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]
        oh, ow = (
            (h * stride, w * stride)
            if pad == "SAME"
            else ((h - 1) * stride + k, (w - 1) * stride + k)
        )
        ops.append(f"tconv k={k} s={stride} {pad} oc={oc} act={act}")
        return b.transpose_conv(
            y, b.rand((oc, k, k, c)), (oh, ow), stride, pad, b.rand((oc,), 0.2), act
        )
    if kind == "mul":
        other = rng.random()
        act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]
        if other < 0.4:
            z = b.conv2d(y, b.rand((c, 1, 1, c)), b.rand((c,), 0.2))
        elif other < 0.7:
            z = b.rand((c,), float(rng.uniform(0.1, 2.0)))
        elif other < 0.85:  # a constant scalar: a table of the producer's integers
            z = np.array(float(rng.choice([-1, 1]) * rng.uniform(0.25, 2.0)), np.float32)
        else:
            z = b.conv2d(b.max_pool2d(y, (h, 1), (h, 1)), b.rand((c, 1, 1, c)))
        ops.append(f"mul other={other:.2f} act={act}")
        return b.mul(y, z, activation=act)
    act = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]
    pad = "SAME" if rng.random() < 0.6 else "VALID"
    if kind in ("conv", "dw"):
        k = int(rng.integers(1, 6))
        stride = int(rng.integers(1, 3))
        dil = int(rng.integers(1, 3)) if k > 1 and stride == 1 else 1
        if pad == "VALID" and not (
            _window_fits(h, k, stride, dil) and _window_fits(w, k, stride, dil)
        ):
            pad = "SAME"
        if kind == "conv":
            oc = int(rng.integers(1, 25))
            ops.append(f"conv k={k} s={stride} d={dil} {pad} oc={oc} act={act}")
            return b.conv2d(y, b.rand((oc, k, k, c)), b.rand((oc,), 0.2), stride, dil, pad, act)
        m = int(rng.integers(1, 3))
        ops.append(f"dw k={k} s={stride} d={dil} {pad} m={m} act={act}")
        f = b.rand((1, k, k, c * m), math.sqrt(2 / (k * k)))
        return b.depthwise_conv2d(y, f, b.rand((c * m,), 0.2), stride, dil, pad, m, act)
    if kind == "add":
        other = rng.random()
        op = b.sub if rng.random() < 0.3 else b.add
        if other < 0.4:  # a branch of the same shape
            z = b.conv2d(y, b.rand((c, 1, 1, c)), b.rand((c,), 0.2))
        elif other < 0.7:  # a per-channel constant
            z = b.rand((c,), float(rng.uniform(0.1, 2.0)))
        else:  # broadcast along rows
            z = b.conv2d(b.max_pool2d(y, (h, 1), (h, 1)), b.rand((c, 1, 1, c)))
        ops.append(f"{op.__name__} other={other:.2f} act={act}")
        return op(y, z, activation=act)
    if kind == "pool":
        k, stride = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        if pad == "VALID" and not (_window_fits(h, k, stride) and _window_fits(w, k, stride)):
            pad = "SAME"
        avg = rng.random() < 0.5
        ops.append(f"{'avg' if avg else 'max'}_pool k={k} s={stride} {pad} act={act}")
        return (b.avg_pool2d if avg else b.max_pool2d)(y, k, stride, pad, act)
    if kind == "concat":
        oc = int(rng.integers(1, 9))
        ops.append(f"concat oc={oc}")
        return b.concat([y, b.conv2d(y, b.rand((oc, 1, 1, c)), b.rand((oc,), 0.2))], axis=3)
    if kind == "pad":
        p = [[0, 0]] + [[int(v) for v in rng.integers(0, 3, 2)] for _ in range(2)] + [[0, 0]]
        ops.append(f"pad {p}")
        return b.pad(y, p)
    ops.append("reshape")
    return b.reshape(b.reshape(y, (n, h * w, c)), (n, h, w, c))


def generate(seed: int) -> tuple[bytes, str, dict[str, Any]]:
    """The model, its description and the delegate options of case `seed`."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(seed=seed)
    shape = (
        int(rng.integers(1, 3)),
        int(rng.integers(3, 13)),
        int(rng.integers(3, 13)),
        int(rng.integers(1, 20)),
    )
    y = b.input("x", shape)
    ops: list[str] = [f"input {shape}"]
    for _ in range(int(rng.integers(1, 5))):
        y = _step(b, y, rng, ops)
        if max(b.shape(y)[1:3]) > 24:  # keep the cases small: transpose convs and tiles grow
            y = b.max_pool2d(y, 2, 2, "SAME")
            ops.append("max_pool k=2 s=2 SAME")
    if rng.random() < 0.3:
        n = b.shape(y)[0]
        if rng.random() < 0.5:
            y = b.reshape(y, (n, -1))
        else:
            y = b.mean(y, [1, 2])
            ops.append("mean")
        units = int(rng.integers(1, 20))
        ops.append(f"fc {units}")
        y = b.fully_connected(y, b.rand((units, b.shape(y)[1])), b.rand((units,), 0.2))
        if rng.random() < 0.5:
            ops.append("softmax")
            y = b.softmax(y)
    b.output(y)
    per_channel = bool(rng.random() < 0.7)
    io = "float" if rng.random() < 0.4 else "int8"
    jitter = float(rng.choice([0.0, 0.3]))
    pow2 = bool(rng.random() < 0.2)
    model = quantize_model(
        b.build(), per_channel=per_channel, io=io, seed=seed, jitter=jitter, pow2_scales=pow2
    )
    options = {
        "precision": str(rng.choice(["fp32", "fp16"])),
        "conv_algorithm": str(rng.choice(["auto", "auto", "direct", "implicit_gemm"])),
    }
    desc = (
        f"seed={seed} per_channel={per_channel} io={io} jitter={jitter} pow2={pow2}: "
        + "; ".join(ops)
    )
    return model, desc, options


def _cases() -> list[Any]:
    one = os.environ.get("CLGPU_INT8_SEED")
    if one:
        return [pytest.param(int(one), rt, id=f"{one}-{rt}") for rt in RUNTIMES]
    n = int(os.environ.get("CLGPU_INT8_CASES", CI_CASES))
    return [
        pytest.param(BASE_SEED + i, RUNTIMES[i % 2], id=f"{BASE_SEED + i}-{RUNTIMES[i % 2]}")
        for i in range(n)
    ]


@pytest.mark.parametrize(("seed", "runtime"), _cases())
def test_int8_random(seed: int, runtime: str) -> None:
    from conftest import _importable

    if not _importable(runtime):
        pytest.skip(f"{runtime} is not installed")
    model, desc, options = generate(seed)
    try:
        r = check_int8_parity(model, runtime, seed=seed, **options)
    except AssertionError as e:
        raise AssertionError(f"{desc}\noptions {options}\n{e}") from None
    STATS.add(r.stats)


def test_int8_random_overall() -> None:
    """The acceptance over every case run before: >= 99.9 % bit-exact, none beyond 1 quantum."""
    if STATS.elements == 0:
        pytest.skip("no random int8 case ran")
    print(f"int8 random parity: {STATS}")
    assert STATS.max_quanta <= 1, str(STATS)
    assert STATS.fraction >= 0.999, str(STATS)
