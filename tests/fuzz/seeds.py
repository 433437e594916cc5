"""Seed models of the mutation fuzzer, built with clgpu_delegate.modelgen: small graphs that
together use every op family the delegate claims (convolutions of each algorithm's shapes with
fp16 weights behind DEQUANTIZE, pools, element-wise ops, reductions, copies, splits, slices,
gathers) and the folds of a keyword spotter's blocks, float and int8, so a mutation lands on each
op's checks and each fold's. Real models are added with `--models DIR`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tflite

from clgpu_delegate.modelgen import ModelBuilder, quantize_model

OPS = tflite.BuiltinOperator


def _convs() -> bytes:
    b = ModelBuilder(seed=1)
    x = b.input("x", (1, 9, 8, 3))
    y = b.conv2d(x, b.rand((8, 3, 3, 3)), b.rand((8,)), activation="RELU")
    y = b.depthwise_conv2d(y, b.rand((1, 3, 3, 8), 0.5), b.rand((8,)), stride=2)
    z = b.conv2d(y, b.rand((8, 1, 1, 8)), b.rand((8,)), fp16_weights=True)
    y = b.add(z, y, "RELU6")
    y = b.conv2d(y, b.rand((4, 5, 5, 8)), b.rand((4,)))
    b.output(y)
    return b.build()


def _pools_and_copies() -> bytes:
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 8, 10, 4))
    p = b.max_pool2d(x, 2, 2)
    q = b.avg_pool2d(x, 3, 2, "SAME", "RELU")
    q = b.resize_bilinear(q, (4, 5))
    y = b.concat([p, q], 3)
    y = b.pad(y, [[0, 0], [1, 1], [0, 1], [0, 0]])
    y = b.transpose(y, (0, 2, 1, 3))
    y = b.resize_nearest(y, (12, 8))
    b.output(b.mirror_pad(y, [[0, 0], [1, 0], [0, 2], [0, 0]]))
    return b.build()


def _dense() -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (2, 3, 8))
    y = b.reshape(x, (6, 8))
    y = b.fully_connected(y, b.rand((16, 8)), b.rand((16,)), activation="RELU")
    y = b.fully_connected(y, b.rand((10, 16)), None)
    y = b.softmax(b.reshape(y, (2, 3, 10)))
    b.output(b.mean(y, (1,), keep_dims=False))
    b.output(b.log_softmax(b.squeeze(b.expand_dims(b.sum(x, (2,)), 0), (0,))))
    return b.build()


def _elementwise() -> bytes:
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 5, 6, 3))
    s = b.input("s", (1, 1, 1, 3))
    y = b.mul(x, s)
    y = b.sub(y, b.rand((3,), 1.0), "RELU")
    y = b.maximum(y, b.minimum(x, b.rand((6, 3), 1.0)))
    y = b.hard_swish(b.tanh(y))
    y = b.squared_difference(y, b.logistic(x))
    y = b.div(y, b.add(b.relu6(x), np.full((3,), 2.0, np.float32)))
    y = b.prelu(y, b.rand((1, 1, 3), 0.2))
    b.output(b._unary(OPS.EXP, y))
    return b.build()


def _splits() -> bytes:
    b = ModelBuilder(seed=5)
    x = b.input("x", (2, 6, 4))
    a, c, d = b.split(x, 1, 3)
    e, f = b.split_v(x, (3, 1), 2)
    y = b.concat([b.add(a, c), d], 1)
    y = b.tile(y, (1, 1, 2))
    b.output(b.reduce_max(y, (1,)))
    b.output(b.reduce_min(b.pad_v2(e, [[0, 0], [1, 1], [0, 0]], -2.0), (2,), keep_dims=True))
    b.output(b._reduce(OPS.REDUCE_PROD, f, (1,), False))
    return b.build()


def _transpose_conv() -> bytes:
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 4, 5, 3))
    y = b.transpose_conv(x, b.rand((4, 3, 3, 3)), (8, 10), bias=b.rand((4,)))
    y = b.conv2d(y, b.rand((2, 7, 7, 4)), b.rand((2,)), activation="RELU6")
    b.output(y)
    return b.build()


def _selects() -> bytes:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 8, 4))
    y = b.strided_slice(x, (0, 1, 0, 0), (1, 6, 8, 4), (1, 2, 3, 1))
    y = b.slice(y, (0, 0, 1, 1), (1, 2, 2, 3))
    y = b.gather(b.expand_dims(y, 0), [2, 0, 1], axis=4)
    b.output(b.reshape(y, (2, 6)))
    z = b.space_to_depth(b.depth_to_space(x, 2), 2)
    b.output(b.batch_matmul(b.reshape(z, (6, 8, 4)), b.rand((6, 4, 3))))
    row = b.squeeze(b.slice(x, (0, 0, 0, 0), (1, 1, 8, 4)), (0, 1))
    b.output(b.pack([row, b.const(b.rand((8, 4)))], 1))
    return b.build()


def _block_chain(seed: int) -> ModelBuilder:
    """A keyword spotter's tail in small: inverted-residual blocks (1x1 expand, a PAD and a
    depthwise of stride 2, 1x1 project, a residual ADD) and a squeeze (global average pool,
    RESHAPE, FULLY_CONNECTED, SOFTMAX): the shapes the depthwise, expand, residual and squeeze
    folds take."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 10, 6, 1))
    h = b.conv2d(x, b.rand((8, 3, 3, 1)), b.rand((8,)), activation="RELU")
    e = b.conv2d(h, b.rand((16, 1, 1, 8)), b.rand((16,)), activation="RELU6")
    d = b.depthwise_conv2d(e, b.rand((1, 3, 3, 16), 0.5), b.rand((16,)), activation="RELU6")
    h = b.add(b.conv2d(d, b.rand((8, 1, 1, 16)), b.rand((8,))), h)
    e = b.pad(
        b.conv2d(h, b.rand((16, 1, 1, 8)), b.rand((16,)), activation="RELU6"),
        [[0, 0], [0, 1], [0, 1], [0, 0]],
    )
    d = b.depthwise_conv2d(
        e, b.rand((1, 3, 3, 16), 0.5), b.rand((16,)), stride=2, padding="VALID", activation="RELU6"
    )
    y = b.conv2d(d, b.rand((12, 1, 1, 16)), b.rand((12,)))
    y = b.reshape(b.avg_pool2d(y, (5, 3), 1), (1, 12))
    b.output(b.softmax(b.fully_connected(y, b.rand((4, 12)), b.rand((4,)))))
    return b


def _blocks() -> bytes:
    return _block_chain(8).build()


def _blocks_int8() -> bytes:
    return quantize_model(_block_chain(9).build(), io="int8", seed=9, jitter=0.3)


SEEDS: dict[str, Callable[[], bytes]] = {
    "convs": _convs,
    "pools_and_copies": _pools_and_copies,
    "dense": _dense,
    "elementwise": _elementwise,
    "splits": _splits,
    "transpose_conv": _transpose_conv,
    "selects": _selects,
    "blocks": _blocks,
    "blocks_int8": _blocks_int8,
}


def generated() -> dict[str, bytes]:
    return {name: build() for name, build in SEEDS.items()}
