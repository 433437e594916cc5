"""Small models written in PyTorch as a keyword-spotting or landmark project writes them, for
bench/convert_models.py (`--models small`): issue #42's kinds (depthwise-separable CNNs on a
spectrogram, a temporal CNN of 1-D convolutions, an inverted-residual spotter, a tiny dense
model, PRELU CNNs, an NCHW audio CNN with reflect padding) as the converters write them, not as
the project's own model builder does. Random weights, torch seeded by the caller; each function
returns the module and its example inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _ds_cnn(width: int, blocks: int) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """Hello Edge's DS-CNN: a 10x4 strided conv on 49x10 MFCCs, then depthwise 3x3 + pointwise
    blocks with batch norm and ReLU, average pool, a dense classifier."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        from torch import nn

        def bn_relu(c: int) -> list[nn.Module]:
            return [nn.BatchNorm2d(c), nn.ReLU()]

        layers: list[nn.Module] = [nn.Conv2d(1, width, (10, 4), (2, 2), (5, 1)), *bn_relu(width)]
        for _ in range(blocks):
            layers += [nn.Conv2d(width, width, 3, padding=1, groups=width), *bn_relu(width)]
            layers += [nn.Conv2d(width, width, 1), *bn_relu(width)]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 12)]
        return nn.Sequential(*layers), (torch.randn(1, 1, 49, 10),)

    return build


def _tc_resnet(width: int) -> tuple[Any, tuple[Any, ...]]:
    """TC-ResNet: MFCCs as channels of a 1-D signal (40 x 98), three strided 9-tap Conv1d
    residual blocks with 1x1 shortcuts, widths 1, 1.5, 2 and 2.5 times `width`."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv1d(cin, cout, 9, stride, 4, bias=False), nn.BatchNorm1d(cout), nn.ReLU(),
                nn.Conv1d(cout, cout, 9, 1, 4, bias=False), nn.BatchNorm1d(cout))
            self.skip = nn.Sequential(nn.Conv1d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm1d(cout), nn.ReLU())

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.skip(x))

    w = [width, int(width * 1.5), width * 2, int(width * 2.5)]
    net = nn.Sequential(
        nn.Conv1d(40, w[0], 3, 1, 1, bias=False),
        Block(w[0], w[1], 2), Block(w[1], w[2], 2), Block(w[2], w[3], 2),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(w[3], 12), nn.Softmax(-1))
    return net, (torch.randn(1, 40, 98),)


def _kws_mnv2() -> tuple[Any, tuple[Any, ...]]:
    """A MobileNetV2-style spotter on a 98x40 log-mel image: inverted residual blocks (expand
    1x1, depthwise 3x3, linear project, residual where shapes allow) with ReLU6."""
    import torch
    from torch import nn

    class IRB(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            self.res = stride == 1 and cin == cout
            self.f = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
                nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
                nn.ReLU6(), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            return x + self.f(x) if self.res else self.f(x)

    spec = [(16, 16, 1, 1), (16, 24, 2, 4), (24, 24, 1, 4), (24, 32, 2, 4), (32, 32, 1, 4),
            (32, 48, 2, 4), (48, 48, 1, 4), (48, 64, 1, 4)]
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        *(IRB(*s) for s in spec), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 12))
    return net, (torch.randn(1, 1, 98, 40),)


def _tiny_mlp() -> tuple[Any, tuple[Any, ...]]:
    """A dense classifier of a few hundred features (sensor or embedding input)."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                        nn.Linear(64, 10), nn.Softmax(-1))
    return net, (torch.randn(1, 256),)


def _prelu_cnn(shared: bool) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """A face-landmark-style CNN: strided 3x3 convs and residual 3x3 blocks with PRELU (one
    slope per channel, or PyTorch's default one shared slope), a dense head."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        from torch import nn

        def prelu(c: int) -> nn.Module:
            # Slopes as training leaves them, spread over channels: PyTorch's initial 0.25 in
            # every channel is one constant to a converter (litert-torch writes it as a scalar).
            p = nn.PReLU() if shared else nn.PReLU(c)
            with torch.no_grad():
                p.weight.uniform_(0.05, 0.4)
            return p

        class Res(nn.Module):
            def __init__(self, c: int) -> None:
                super().__init__()
                self.f = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), prelu(c), nn.Conv2d(c, c, 3, 1, 1))
                self.act = prelu(c)

            def forward(self, x: Any) -> Any:
                return self.act(x + self.f(x))

        layers: list[nn.Module] = []
        cin = 3
        for c in (16, 32, 64, 64):
            layers += [nn.Conv2d(cin, c, 3, 2, 1), prelu(c), Res(c)]
            cin = c
        layers += [nn.Flatten(), nn.Linear(64 * 4 * 4, 136)]
        return nn.Sequential(*layers), (torch.randn(1, 3, 64, 64),)

    return build


def _audio_reflect() -> tuple[Any, tuple[Any, ...]]:
    """An NCHW audio CNN as PyTorch writes it: reflect-padded 3x3 convs on a 1 x 64 x 96 mel
    image, max pools, a channel mean and a dense head (converters add the layout transposes and
    MIRROR_PADs)."""
    import torch
    from torch import nn

    layers: list[nn.Module] = []
    cin = 1
    for c in (16, 32, 64, 64):
        layers += [nn.Conv2d(cin, c, 3, padding=1, padding_mode="reflect"), nn.BatchNorm2d(c),
                   nn.ReLU(), nn.MaxPool2d(2)]
        cin = c

    class Head(nn.Module):
        def forward(self, x: Any) -> Any:
            return x.mean(dim=(2, 3))

    net = nn.Sequential(*layers, Head(), nn.Linear(64, 10))
    return net, (torch.randn(1, 1, 64, 96),)


SMALL: dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]] = {
    "ds_cnn_s": _ds_cnn(64, 4),
    "ds_cnn_m": _ds_cnn(172, 4),
    "ds_cnn_l": _ds_cnn(276, 5),
    "tc_resnet8": lambda: _tc_resnet(16),
    "kws_mnv2": _kws_mnv2,
    "tiny_mlp": _tiny_mlp,
    "prelu_cnn": _prelu_cnn(shared=False),
    "prelu_cnn_shared": _prelu_cnn(shared=True),
    "audio_reflect": _audio_reflect,
}
