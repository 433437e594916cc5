"""The zoo's layer conventions on top of `ModelBuilder`: He-scaled weights, batch norm folded
into the conv bias, an fp16-weights option, and the input and classifier ends of a network."""

from __future__ import annotations

import math
from dataclasses import dataclass

from clgpu_delegate.modelgen.builder import ModelBuilder

_BIAS_STD = 0.02


@dataclass
class Net:
    """A builder plus the zoo's layer conventions (He init, folded-BN bias, fp16 option)."""

    b: ModelBuilder
    fp16: bool = False

    def channels(self, x: int) -> int:
        return self.b.shape(x)[-1]

    def conv(
        self,
        x: int,
        out: int,
        k: int | tuple[int, int],
        stride: int = 1,
        act: str | None = "RELU",
        gain: float = 2.0,
        padding: str = "SAME",
    ) -> int:
        """Conv with bias; `gain` 2 suits a following ReLU, 1 a linear output."""
        kh, kw = (k, k) if isinstance(k, int) else k
        c = self.channels(x)
        w = self.b.rand((out, kh, kw, c), scale=math.sqrt(gain / (kh * kw * c)))
        return self.b.conv2d(
            x,
            w,
            self.b.rand((out,), scale=_BIAS_STD),
            stride=stride,
            padding=padding,
            activation=act,
            fp16_weights=self.fp16,
        )

    def dwconv(self, x: int, k: int, stride: int = 1, act: str | None = "RELU6") -> int:
        c = self.channels(x)
        w = self.b.rand((1, k, k, c), scale=math.sqrt(2.0 / (k * k)))
        return self.b.depthwise_conv2d(
            x,
            w,
            self.b.rand((c,), scale=_BIAS_STD),
            stride=stride,
            activation=act,
            fp16_weights=self.fp16,
        )

    def fc(self, x: int, out: int, act: str | None = "RELU", gain: float = 2.0) -> int:
        k = self.b.shape(x)[-1]
        w = self.b.rand((out, k), scale=math.sqrt(gain / k))
        return self.b.fully_connected(
            x, w, self.b.rand((out,), scale=_BIAS_STD), activation=act, fp16_weights=self.fp16
        )

    def finish(self, logits: int, softmax: bool) -> bytes:
        self.b.output(self.b.softmax(logits) if softmax else logits)
        return self.b.build()


def start(
    size: int | tuple[int, int], channels: int, seed: int, fp16_weights: bool
) -> tuple[Net, int]:
    h, w = (size, size) if isinstance(size, int) else size
    net = Net(ModelBuilder(seed=seed), fp16_weights)
    return net, net.b.input("input", (1, h, w, channels))


def pool_conv_head(net: Net, x: int, num_classes: int) -> int:
    """Global average pool + 1x1 conv logits + reshape, as in the TFLite MobileNets."""
    _, h, w, _ = net.b.shape(x)
    x = net.b.avg_pool2d(x, (h, w), 1)
    x = net.conv(x, num_classes, 1, act=None, gain=1.0)
    return net.b.reshape(x, (1, num_classes))
