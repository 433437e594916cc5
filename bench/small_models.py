"""Small models of the kinds where a GPU delegate is host-bound or a cost model misjudges
(issue #42), built with the project's model builder (random He-scaled weights):

- kws_mnv2_*: MobileNetV2-style inverted residuals over a spectrogram seen as (1, T, 1, F), as
  keyword spotters are converted (71-110 nodes), float32 and int8;
- ds_cnn_*: the classic depthwise-separable keyword spotter (conv 10x4/2, DS blocks, pool, FC);
- dense_*: a few wide FULLY_CONNECTED layers (weight-bound on the CPU);
- prelu_cnn: a face-landmark-style CNN of conv + PRELU residual blocks (_shared: one slope
  per PRELU, as PyTorch's nn.PReLU() converts; _int8: its integer form, whose PRELUs XNNPACK
  leaves to TFLite's one-thread kernel);
- audio_layout: convolutions wrapped in the TRANSPOSE / RESHAPE / PAD / MIRROR_PAD chains that
  NCHW converters emit.

    python bench/small_models.py --out DIR      # writes DIR/<name>.tflite
    python bench/small_models.py --out DIR --held-out 24 --seed 1

`--held-out N`: N models of the same kinds with shapes drawn at random (named by their
parameters), to check that a rule tuned on the fixed set holds on shapes nobody tuned it to;
`--held-out-kinds image` draws the zoo's MobileNets at input sizes 32-224 instead;
`--held-out-dynamic` turns the float draws into their dynamic-range form. `--ds-widths` writes
float DS-CNNs over widths 16-128 instead (dsw_*: where the split-K GEMM and its launch forms start),
`--dense-grid` dense stacks over inputs 256 and 2048, widths 128-3072 and 2 or 4 layers (dn_*:
where a dense chain's one launch pays, and where its weights leave the GPU's cache).
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable
from pathlib import Path

from clgpu_delegate.modelgen import dynamic_range_model, zoo
from clgpu_delegate.modelgen._layers import Net, start
from clgpu_delegate.modelgen._ptq import quantize_model
from clgpu_delegate.modelgen.builder import ModelBuilder


def kws_mnv2(
    frames: int = 98, bins: int = 104, blocks: int = 14, width: int = 32, seed: int = 0
) -> bytes:
    """Inverted residual blocks of 3x1 depthwise convs along time: expand 1x1, depthwise,
    project 1x1, residual ADD where the shape allows."""
    net, x = start((frames, 1), bins, seed, False)
    x = net.conv(x, width, (3, 1), act="RELU6")
    c = width
    for i in range(blocks):
        out = width * (1 + i // 5)
        stride = 2 if i in (3, 8) else 1
        y = net.conv(x, c * 4, 1, act="RELU6")
        y = _dw_time(net, y, stride)
        y = net.conv(y, out, 1, act=None, gain=1.0)
        x = net.b.add(x, y) if stride == 1 and out == c else y
        c = out
    x = net.conv(x, 128, 1, act="RELU6")
    _, h, w, _ = net.b.shape(x)
    x = net.b.avg_pool2d(x, (h, w), 1)
    x = net.b.reshape(x, (1, 128))
    return net.finish(net.fc(x, 12, act=None, gain=1.0), True)


def _dw_time(net: Net, x: int, stride: int) -> int:
    """A 3x1 depthwise conv along time (axis H), ReLU6."""
    c = net.channels(x)
    w = net.b.rand((1, 3, 1, c), scale=math.sqrt(2.0 / 3))
    return net.b.depthwise_conv2d(
        x, w, net.b.rand((c,), scale=0.02), stride=(stride, 1), activation="RELU6"
    )


def ds_cnn(
    frames: int = 49, bins: int = 10, width: int = 64, blocks: int = 4, seed: int = 0
) -> bytes:
    net, x = start((frames, bins), 1, seed, False)
    x = net.conv(x, width, (10, 4), stride=2, act="RELU")
    for _ in range(blocks):
        x = net.dwconv(x, 3, 1, act="RELU")
        x = net.conv(x, width, 1, act="RELU")
    _, h, w, _ = net.b.shape(x)
    x = net.b.reshape(net.b.avg_pool2d(x, (h, w), 1), (1, width))
    return net.finish(net.fc(x, 12, act=None, gain=1.0), True)


def dense(features: int = 1024, hidden: int = 2048, layers: int = 3, seed: int = 0) -> bytes:
    net = Net(ModelBuilder(seed=seed))
    x = net.b.input("features", (1, features))
    for _ in range(layers - 1):
        x = net.fc(x, hidden)
    return net.finish(net.fc(x, 10, act=None, gain=1.0), True)


def prelu_cnn(
    size: int = 192, width: int = 16, stages: int = 5, seed: int = 0, shared: bool = False
) -> bytes:
    """Conv + PRELU, then per stage: a stride-2 conv and two residual conv-PRELU blocks.
    `shared`: one slope per PRELU (PyTorch's nn.PReLU() default) instead of one per channel."""
    net, x = start(size, 3, seed, False)

    def _prelu(net: Net, x: int) -> int:
        c = 1 if shared else net.channels(x)
        return net.b.prelu(x, net.b.rand((1, 1, c), scale=0.1) + 0.25)

    x = _prelu(net, net.conv(x, width, 3, stride=2, act=None))
    c = width
    for s in range(stages):
        if s:
            c = min(c * 2, 128)
            x = _prelu(net, net.conv(x, c, 3, stride=2, act=None))
        for _ in range(2):
            y = _prelu(net, net.conv(x, c, 3, act=None))
            y = net.conv(y, c, 3, act=None, gain=1.0)
            x = _prelu(net, net.b.add(x, y))
    _, h, w, _ = net.b.shape(x)
    x = net.b.reshape(net.b.avg_pool2d(x, (h, w), 1), (1, c))
    return net.finish(net.fc(x, 1404 // 3, act=None, gain=1.0), False)


def audio_layout(
    frames: int = 64, bins: int = 64, convs: int = 32, width: int = 32, seed: int = 0
) -> bytes:
    """Each conv as an NCHW converter writes it: TRANSPOSE to NHWC, MIRROR_PAD (or PAD), a VALID
    conv, TRANSPOSE back, and a RESHAPE pair every other block."""
    net, x = start((frames, bins), 1, seed, False)
    b = net.b
    x = b.transpose(x, (0, 3, 1, 2))  # the model's NCHW activations
    for i in range(convs):
        y = b.transpose(x, (0, 2, 3, 1))
        pad = [(0, 0), (1, 1), (1, 1), (0, 0)]
        y = b.mirror_pad(y, pad) if i % 2 else b.pad(y, pad)
        stride = 2 if i in (4, 10, 18) else 1
        y = net.conv(
            y, width if i < 8 else width * 2, 3, stride=stride, act="RELU", padding="VALID"
        )
        y = b.transpose(y, (0, 3, 1, 2))
        if i % 2:
            shape = b.shape(y)
            y = b.reshape(b.reshape(y, (1, shape[1], shape[2] * shape[3])), shape)
        x = y
    x = b.transpose(x, (0, 2, 3, 1))
    _, h, w, c = b.shape(x)
    x = b.reshape(b.avg_pool2d(x, (h, w), 1), (1, c))
    return net.finish(net.fc(x, 35, act=None, gain=1.0), True)


def models() -> dict[str, Callable[[], bytes]]:
    """name -> builder of every model of this set (float; '_int8': the integer version)."""
    float_models: dict[str, Callable[[], bytes]] = {
        "kws_mnv2_small": lambda: kws_mnv2(blocks=17, width=24),
        "kws_mnv2_large": lambda: kws_mnv2(frames=98, bins=40, blocks=20, width=32),
        "ds_cnn_s": lambda: ds_cnn(width=64, blocks=4),
        "ds_cnn_l": lambda: ds_cnn(width=276, blocks=5),
        "dense_small": lambda: dense(features=256, hidden=512, layers=3),
        "dense_wide": lambda: dense(features=1024, hidden=4096, layers=3),
        "prelu_cnn": prelu_cnn,
        "prelu_cnn_shared": lambda: prelu_cnn(shared=True),
        "audio_layout": audio_layout,
    }
    out = dict(float_models)
    for name in ("kws_mnv2_small", "kws_mnv2_large", "ds_cnn_s", "ds_cnn_l", "prelu_cnn"):
        out[name + "_int8"] = lambda f=float_models[name]: quantize_model(f(), samples=2)
    return out


# The kinds held_out draws from, as often as listed. "image" (the zoo's MobileNets at an input
# size drawn from 32-224, where the GPU's floor and the CPU's arithmetic cross) is drawn only
# when asked for, so that the default draws of a seed stay what the tables name.
HELD_OUT_KINDS = ("kws", "kws", "ds", "ds", "dense", "prelu", "audio")


def held_out(
    count: int, seed: int, kinds: tuple[str, ...] = HELD_OUT_KINDS, dynamic: bool = False
) -> dict[str, Callable[[], bytes]]:
    """`count` models of `kinds` with parameters drawn from `seed` (half of the spotters and a
    third of the images quantized to int8): name -> builder, the name spelling the parameters.
    `dynamic`: the same draws' float models only, in TF's dynamic-range form (int8 weights,
    float activations, hybrid kernels on the CPU), named `..._dyn`."""
    drawn = _draw(count, seed, kinds)
    if not dynamic:
        return drawn
    return {
        name + "_dyn": lambda m=make: dynamic_range_model(m())
        for name, make in drawn.items()
        if not name.endswith("_int8")
    }


def held_out_kinds(text: str) -> tuple[str, ...]:
    """--held-out-kinds' comma-separated value; empty: HELD_OUT_KINDS."""
    return tuple(k for k in text.split(",") if k) or HELD_OUT_KINDS


def _draw(count: int, seed: int, kinds: tuple[str, ...]) -> dict[str, Callable[[], bytes]]:
    unknown = set(kinds) - set(HELD_OUT_KINDS) - {"image"}
    if unknown or not kinds:
        raise ValueError(f"held-out kinds are {sorted(set(HELD_OUT_KINDS)) + ['image']}")
    rng = random.Random(seed)
    out: dict[str, Callable[[], bytes]] = {}
    while len(out) < count:
        kind = rng.choice(kinds)
        s = rng.randrange(1000)
        if kind == "image":
            net_name = rng.choice(("mobilenet_v1", "mobilenet_v2"))
            a = dict(size=rng.choice((32, 64, 96, 128, 160, 192, 224)), seed=s)
            name, make = f"ho_{net_name}_s{a['size']}", zoo.MODELS[net_name]
        elif kind == "kws":
            a = dict(frames=rng.choice((49, 61, 98, 124)), bins=rng.choice((10, 40, 64, 104)),
                     blocks=rng.randrange(6, 21), width=rng.choice((16, 24, 32, 48)), seed=s)
            name, make = "ho_kws_f{frames}_b{bins}_n{blocks}_w{width}".format(**a), kws_mnv2
        elif kind == "ds":
            a = dict(frames=rng.choice((49, 61, 98)), bins=rng.choice((10, 13, 40)),
                     width=rng.choice((32, 64, 128, 172, 276)), blocks=rng.randrange(3, 7), seed=s)
            name, make = "ho_ds_f{frames}_b{bins}_w{width}_n{blocks}".format(**a), ds_cnn
        elif kind == "dense":
            a = dict(features=rng.choice((64, 256, 784, 2048)),
                     hidden=rng.choice((128, 512, 1024, 3072)), layers=rng.randrange(2, 6), seed=s)
            name, make = "ho_dense_f{features}_h{hidden}_l{layers}".format(**a), dense
        elif kind == "prelu":
            a = dict(size=rng.choice((64, 96, 128, 192)), width=rng.choice((8, 16, 32)),
                     stages=rng.randrange(2, 6), seed=s, shared=rng.random() < 0.5)
            name = "ho_prelu_s{size}_w{width}_n{stages}".format(**a)
            name += "_sh" if a["shared"] else ""
            make = prelu_cnn
        else:
            a = dict(frames=rng.choice((32, 64, 96)), bins=rng.choice((32, 64, 80)),
                     convs=rng.randrange(8, 33), width=rng.choice((16, 32, 48)), seed=s)
            name, make = "ho_audio_f{frames}_b{bins}_n{convs}_w{width}".format(**a), audio_layout
        int8_share = {"image": 1 / 3, "kws": 0.5, "ds": 0.5}.get(kind, 0)
        if int8_share and rng.random() < int8_share:
            out[name + "_int8"] = lambda m=make, a=a: quantize_model(m(**a), samples=2)
        else:
            out[name] = lambda m=make, a=a: m(**a)
    return out


def ds_widths() -> dict[str, Callable[[], bytes]]:
    """Float DS-CNNs (ds_cnn) over widths 16-128 on two spectrograms and at two depths: where a
    DS block's split-K GEMM starts, and which launch form its partition keeps, by width."""
    out: dict[str, Callable[[], bytes]] = {}
    for bins in (10, 40):
        for w in (16, 24, 32, 48, 64, 96, 128):
            for frames, blocks in ((49, 4), (98, 6)):
                a = dict(frames=frames, bins=bins, width=w, blocks=blocks, seed=w + bins)
                out[f"dsw_f{frames}_b{bins}_w{w}_n{blocks}"] = lambda a=a: ds_cnn(**a)
    return out


def dense_grid() -> dict[str, Callable[[], bytes]]:
    """Dense stacks over two input widths, four layer widths and two depths (5-100 MB of weights:
    in and past an H200's 50 MB of L2)."""
    out: dict[str, Callable[[], bytes]] = {}
    for f in (256, 2048):
        for h in (128, 512, 1024, 3072):
            for layers in (2, 4):
                a = dict(features=f, hidden=h, layers=layers, seed=f + h + layers)
                out[f"dn_f{f}_h{h}_l{layers}"] = lambda a=a: dense(**a)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the .tflite files")
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    ap.add_argument(
        "--held-out", type=int, default=0, metavar="N",
        help="instead: N models of these kinds with shapes drawn at random",
    )
    ap.add_argument("--seed", type=int, default=1, help="--held-out's draw")
    ap.add_argument(
        "--ds-widths", action="store_true", help="instead: float DS-CNNs over widths 16-128"
    )
    ap.add_argument(
        "--dense-grid", action="store_true",
        help="instead: dense stacks over widths 128-3072, 2 and 4 layers",
    )
    ap.add_argument(
        "--held-out-kinds", default="",
        help="comma-separated kinds to draw from (kws, ds, dense, prelu, audio, image); "
        "default: all but image, spotters twice as often",
    )
    ap.add_argument(
        "--held-out-dynamic", action="store_true",
        help="the draws' float models in their dynamic-range form (int8 weights)",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    made = (
        held_out(args.held_out, args.seed, held_out_kinds(args.held_out_kinds),
                 args.held_out_dynamic)
        if args.held_out > 0
        else ds_widths()
        if args.ds_widths
        else dense_grid()
        if args.dense_grid
        else models()
    )
    for name, make in made.items():
        if args.only and name not in args.only.split(","):
            continue
        (out / f"{name}.tflite").write_bytes(make())
        print(out / f"{name}.tflite")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
