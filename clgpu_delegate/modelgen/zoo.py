"""Benchmark models with random weights, built with `ModelBuilder` (batch 1, NHWC, float32).

The architectures keep the layer counts and channel widths of the originals; weights are He-scaled
(batch norm folded into the conv bias) so activations stay O(1) through the whole network.
Every builder takes keyword options only and returns the .tflite bytes; `path()` caches the files.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from clgpu_delegate.modelgen._layers import Net, pool_conv_head, start

__all__ = ["MODELS", "build", "cache_dir", "path"]

# Part of every cached file name: bump it whenever a model's graph or weights change.
ZOO_VERSION = 1


def lenet5(
    *,
    size: int = 32,
    num_classes: int = 10,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """LeNet-5: 2x (5x5 conv + 2x2 average pool), FC 120 / 84 / classes; input (1, 32, 32, 1)."""
    net, x = start(size, 1, seed, fp16_weights)
    for filters in (6, 16):
        x = net.conv(x, filters, 5, padding="VALID")
        x = net.b.avg_pool2d(x, 2, 2)
    x = net.b.reshape(x, (1, -1))
    x = net.fc(net.fc(x, 120), 84)
    return net.finish(net.fc(x, num_classes, act=None, gain=1.0), softmax)


# MobileNet v1 1.0: (pointwise filters, depthwise stride) of the 13 separable blocks.
_MOBILENET_V1 = (
    [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)]
    + [(512, 1)] * 5
    + [(1024, 2), (1024, 1)]
)


def mobilenet_v1(
    *,
    size: int = 224,
    num_classes: int = 1001,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """MobileNet v1 1.0: 3x3/2 conv + 13 depthwise-separable blocks, ReLU6, 1x1-conv logits."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.conv(x, 32, 3, stride=2, act="RELU6")
    for filters, stride in _MOBILENET_V1:
        x = net.dwconv(x, 3, stride)
        x = net.conv(x, filters, 1, act="RELU6")
    return net.finish(pool_conv_head(net, x, num_classes), softmax)


# MobileNet v2 1.0: (expansion t, output channels c, repeats n, first stride s).
_MOBILENET_V2 = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


def mobilenet_v2(
    *,
    size: int = 224,
    num_classes: int = 1001,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """MobileNet v2 1.0: 17 inverted-residual blocks (expand, depthwise, linear project, ADD)."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.conv(x, 32, 3, stride=2, act="RELU6")
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            y = net.conv(x, net.channels(x) * t, 1, act="RELU6") if t != 1 else x
            y = net.dwconv(y, 3, s if i == 0 else 1)
            # The residual branch gets a small gain, like a trained BN scale, so sums stay O(1).
            residual = i > 0
            y = net.conv(y, c, 1, act=None, gain=0.25 if residual else 1.0)
            x = net.b.add(x, y) if residual else y
    x = net.conv(x, 1280, 1, act="RELU6")
    return net.finish(pool_conv_head(net, x, num_classes), softmax)


# GoogLeNet inception blocks: 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection.
_INCEPTION_V1 = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def _inception(net: Net, x: int, widths: Sequence[int]) -> int:
    c1, r3, c3, r5, c5, proj = widths
    b1 = net.conv(x, c1, 1)
    b3 = net.conv(net.conv(x, r3, 1), c3, 3)
    b5 = net.conv(net.conv(x, r5, 1), c5, 5)
    bp = net.conv(net.b.max_pool2d(x, 3, 1, padding="SAME"), proj, 1)
    return net.b.concat([b1, b3, b5, bp], axis=3)


def inception_v1(
    *,
    size: int = 224,
    num_classes: int = 1000,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """GoogLeNet (Inception v1) without LRN and auxiliary heads: 9 inception blocks."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.b.max_pool2d(net.conv(x, 64, 7, stride=2), 3, 2, padding="SAME")
    x = net.conv(net.conv(x, 64, 1), 192, 3)
    x = net.b.max_pool2d(x, 3, 2, padding="SAME")
    for name, widths in _INCEPTION_V1.items():
        if name in ("4a", "5a"):
            x = net.b.max_pool2d(x, 3, 2, padding="SAME")
        x = _inception(net, x, widths)
    _, h, w, c = net.b.shape(x)
    x = net.b.reshape(net.b.avg_pool2d(x, (h, w), 1), (1, c))
    return net.finish(net.fc(x, num_classes, act=None, gain=1.0), softmax)


def _inception_a(net: Net, x: int, pool_proj: int) -> int:
    """35x35 block (mixed0-2): 1x1 | 1x1 -> 5x5 | 1x1 -> 3x3 -> 3x3 | avg pool -> 1x1."""
    b1 = net.conv(x, 64, 1)
    b5 = net.conv(net.conv(x, 48, 1), 64, 5)
    b3 = net.conv(net.conv(net.conv(x, 64, 1), 96, 3), 96, 3)
    bp = net.conv(net.b.avg_pool2d(x, 3, 1, padding="SAME"), pool_proj, 1)
    return net.b.concat([b1, b5, b3, bp], axis=3)


def _inception_b(net: Net, x: int, c: int) -> int:
    """17x17 block (mixed4-7): 7x7 convs factorized into 1x7 and 7x1, `c` inner channels."""
    b1 = net.conv(x, 192, 1)
    b7 = net.conv(net.conv(net.conv(x, c, 1), c, (1, 7)), 192, (7, 1))
    bd = net.conv(x, c, 1)
    for k in ((7, 1), (1, 7), (7, 1)):
        bd = net.conv(bd, c, k)
    bd = net.conv(bd, 192, (1, 7))
    bp = net.conv(net.b.avg_pool2d(x, 3, 1, padding="SAME"), 192, 1)
    return net.b.concat([b1, b7, bd, bp], axis=3)


def _inception_c(net: Net, x: int) -> int:
    """8x8 block (mixed9-10): the 3x3s end in parallel 1x3 and 3x1 convs, concatenated."""

    def fork(y: int) -> int:
        return net.b.concat([net.conv(y, 384, (1, 3)), net.conv(y, 384, (3, 1))], axis=3)

    b1 = net.conv(x, 320, 1)
    b3 = fork(net.conv(x, 384, 1))
    bd = fork(net.conv(net.conv(x, 448, 1), 384, 3))
    bp = net.conv(net.b.avg_pool2d(x, 3, 1, padding="SAME"), 192, 1)
    return net.b.concat([b1, b3, bd, bp], axis=3)


def inception_v3(
    *,
    size: int = 299,
    num_classes: int = 1000,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """Inception v3 (Keras `InceptionV3` layout) without auxiliary head: VALID-conv stem,
    3 35x35 blocks, a reduction, 4 17x17 blocks with 1x7 / 7x1 convs, a reduction, 2 8x8
    blocks; the smallest input its VALID convs and pools allow is 75."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.conv(x, 32, 3, stride=2, padding="VALID")
    x = net.conv(x, 32, 3, padding="VALID")
    x = net.b.max_pool2d(net.conv(x, 64, 3), 3, 2)
    x = net.conv(x, 80, 1, padding="VALID")
    x = net.b.max_pool2d(net.conv(x, 192, 3, padding="VALID"), 3, 2)
    for pool_proj in (32, 64, 64):
        x = _inception_a(net, x, pool_proj)
    b3 = net.conv(x, 384, 3, stride=2, padding="VALID")
    bd = net.conv(net.conv(net.conv(x, 64, 1), 96, 3), 96, 3, stride=2, padding="VALID")
    x = net.b.concat([b3, bd, net.b.max_pool2d(x, 3, 2)], axis=3)
    for c in (128, 160, 160, 192):
        x = _inception_b(net, x, c)
    b3 = net.conv(net.conv(x, 192, 1), 320, 3, stride=2, padding="VALID")
    b7 = net.conv(net.conv(net.conv(x, 192, 1), 192, (1, 7)), 192, (7, 1))
    b7 = net.conv(b7, 192, 3, stride=2, padding="VALID")
    x = net.b.concat([b3, b7, net.b.max_pool2d(x, 3, 2)], axis=3)
    for _ in range(2):
        x = _inception_c(net, x)
    # Global average pool as one AVERAGE_POOL_2D (as in inception_v1): same values as MEAN.
    _, h, w, c = net.b.shape(x)
    x = net.b.reshape(net.b.avg_pool2d(x, (h, w), 1), (1, c))
    return net.finish(net.fc(x, num_classes, act=None, gain=1.0), softmax)


def resnet50(
    *,
    size: int = 224,
    num_classes: int = 1000,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """ResNet-50 v1.5: 7x7/2 conv, 3-4-6-3 bottleneck blocks (stride on the 3x3), MEAN + FC."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.b.max_pool2d(net.conv(x, 64, 7, stride=2), 3, 2, padding="SAME")
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True)):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            shortcut = x
            if i == 0:
                shortcut = net.conv(x, 4 * width, 1, stride=stride, act=None, gain=1.0)
            y = net.conv(x, width, 1)
            y = net.conv(y, width, 3, stride=stride)
            # Small gain on the last conv of the branch (a trained BN scale) keeps the sum O(1).
            y = net.conv(y, 4 * width, 1, act=None, gain=0.1)
            x = net.b.add(shortcut, y, activation="RELU")
    x = net.b.mean(x, (1, 2))
    return net.finish(net.fc(x, num_classes, act=None, gain=1.0), softmax)


def _grouped_conv(net: Net, x: int, out: int, k: int, groups: int) -> int:
    """Grouped conv as SPLIT -> one conv per group -> CONCATENATION."""
    parts = net.b.split(x, axis=3, num=groups)
    return net.b.concat([net.conv(p, out // groups, k) for p in parts], axis=3)


def alexnet(
    *,
    size: int = 227,
    num_classes: int = 1000,
    softmax: bool = True,
    seed: int = 0,
    fp16_weights: bool = False,
) -> bytes:
    """AlexNet: 11x11/4 conv, 5x5 and 3x3 convs (two groups where the original split GPUs),
    three max-pools and FC 4096 / 4096 / classes (~61 M parameters at 227)."""
    net, x = start(size, 3, seed, fp16_weights)
    x = net.b.max_pool2d(net.conv(x, 96, 11, stride=4, padding="VALID"), 3, 2)
    x = net.b.max_pool2d(_grouped_conv(net, x, 256, 5, 2), 3, 2)
    x = net.conv(x, 384, 3)
    x = _grouped_conv(net, x, 384, 3, 2)
    x = net.b.max_pool2d(_grouped_conv(net, x, 256, 3, 2), 3, 2)
    x = net.b.reshape(x, (1, -1))
    x = net.fc(net.fc(x, 4096), 4096)
    return net.finish(net.fc(x, num_classes, act=None, gain=1.0), softmax)


def _multi_conv(net: Net, x: int, filters: int, kernels: Sequence[int]) -> int:
    """PyNET's multi-scale block: parallel k x k convs (3/5/7/9) concatenated on channels."""
    branches = [net.conv(x, filters, k) for k in kernels]
    return branches[0] if len(branches) == 1 else net.b.concat(branches, axis=3)


# PyNET-like levels, full resolution first: (filters per branch, kernel sizes of the multi-conv).
_PYNET_LEVELS = [(16, (3,)), (24, (3, 5)), (32, (3, 5)), (64, (3, 5, 7)), (64, (3, 5, 7, 9))]


def pynet(*, size: int = 512, seed: int = 0, fp16_weights: bool = False) -> bytes:
    """PyNET-like image-to-image network: a 5-level U-shaped stack of multi-scale convs.

    Down-sampling alternates strided 3x3 convs and max-pools; up-sampling is nearest (bilinear
    on the top level) resize + 3x3 conv, concatenated with the encoder features of that level.
    Input and output are (1, size, size, 3).
    """
    net, x = start(size, 3, seed, fp16_weights)
    skips = []
    for level, (filters, kernels) in enumerate(_PYNET_LEVELS):
        if level % 2:
            x = net.conv(x, filters, 3, stride=2)
        elif level:
            x = net.b.max_pool2d(x, 2, 2, padding="SAME")
        x = _multi_conv(net, x, filters, kernels)
        x = _multi_conv(net, x, filters, kernels)
        skips.append(x)
    for level in range(len(_PYNET_LEVELS) - 2, -1, -1):
        filters, kernels = _PYNET_LEVELS[level]
        skip = skips[level]
        hw = net.b.shape(skip)[1:3]
        up = net.b.resize_bilinear(x, hw) if level == 0 else net.b.resize_nearest(x, hw)
        x = net.b.concat([skip, net.conv(up, filters, 3)], axis=3)
        x = _multi_conv(net, x, filters, kernels)
    x = net.conv(x, 3, 3, act=None, gain=1.0)
    net.b.output(x)
    return net.b.build()


MODELS: dict[str, Callable[..., bytes]] = {
    "lenet5": lenet5,
    "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2,
    "inception_v1": inception_v1,
    "inception_v3": inception_v3,
    "resnet50": resnet50,
    "alexnet": alexnet,
    "pynet": pynet,
}


def _builder(name: str) -> Callable[..., bytes]:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    return MODELS[name]


def build(name: str, **opts: object) -> bytes:
    """The .tflite bytes of zoo model `name` built with `opts` (e.g. size=64). int8=True: its
    full integer version (modelgen.quantize_model: per-channel int8 weights, int32 biases,
    scales calibrated on two N(0, 1) inputs, float I/O through QUANTIZE / DEQUANTIZE)."""
    int8 = bool(opts.pop("int8", False))
    data = _builder(name)(**opts)
    if int8:
        from clgpu_delegate.modelgen._ptq import quantize_model

        data = quantize_model(data, samples=2)
    return data


def cache_dir() -> Path:
    """$XDG_CACHE_HOME (or ~/.cache) / clgpu_delegate / models."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "clgpu_delegate" / "models"


def _file_name(name: str, opts: dict[str, object], int8: bool = False) -> str:
    """Cache file name: options that differ from the defaults, in a fixed order."""
    fn = _builder(name)
    bound = inspect.signature(fn).bind(**opts)  # TypeError for unknown options
    params = inspect.signature(fn).parameters
    parts = [f"{k}{v}" for k, v in sorted(bound.arguments.items()) if v != params[k].default]
    if int8:
        parts.append("int8")
    return "-".join([name, *parts, f"v{ZOO_VERSION}"]) + ".tflite"


def path(name: str, **opts: object) -> Path:
    """Path of the cached .tflite for `name` and `opts` (int8=True: its integer version, see
    build()); built (atomically) only if missing."""
    int8 = bool(opts.pop("int8", False))
    target = cache_dir() / _file_name(name, opts, int8)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    data = build(name, int8=int8, **opts)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target
