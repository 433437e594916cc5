"""The Keras half of the benchmark's `real` model set: keras.applications models with random
weights and a few architectures of our own (a U-Net with Conv2DTranspose, a Keras 3
UpSampling2D image model, a transformer encoder), converted by TensorFlow's own converter the
way users convert theirs.

    pip install tensorflow-cpu   # optional: never needed by the package or its tests
    python bench/keras_models.py [--out DIR] [--models a,b] [--fp16] [--int8] [--dynamic]

Writes DIR/keras_<name>.tflite (float32), with --fp16 keras_<name>_fp16.tflite (float16
weights behind DEQUANTIZE, as `converter.target_spec.supported_types = [tf.float16]` makes) and
with --int8 keras_<name>_int8.tflite (full-integer post-training quantization: int8 builtins
only, calibrated on a random representative dataset, float inputs and outputs through QUANTIZE /
DEQUANTIZE); with --dynamic keras_<name>_dynamic.tflite (dynamic-range quantization:
`Optimize.DEFAULT` without a representative dataset, int8 weights and float activations, what
TensorFlow's default quantization gives users). Existing files are kept. DIR defaults to
~/.cache/clgpu_delegate/keras-models.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path("~/.cache/clgpu_delegate/keras-models").expanduser()


def _applications(keras: Any) -> dict[str, Callable[[], Any]]:
    app = keras.applications

    def make(ctor: Callable[..., Any], size: int) -> Callable[[], Any]:
        return lambda: ctor(weights=None, input_shape=(size, size, 3))

    return {
        "mobilenet_v2": make(app.MobileNetV2, 224),
        "mobilenet_v3_large": make(app.MobileNetV3Large, 224),
        "efficientnet_b0": make(app.EfficientNetB0, 224),
        "resnet50_v2": make(app.ResNet50V2, 224),
        "densenet121": make(app.DenseNet121, 224),
        "xception": make(app.Xception, 299),
        "inception_v3": make(app.InceptionV3, 299),
        "resnet50": make(app.ResNet50, 224),
    }


def unet(keras: Any, size: int = 256, base: int = 16, depth: int = 4) -> Any:
    """A U-Net: conv blocks, max-pool down, Conv2DTranspose up, skip concatenations."""
    layers = keras.layers
    x = inp = keras.Input((size, size, 3))
    skips = []
    for d in range(depth):
        x = layers.Conv2D(base << d, 3, padding="same", activation="relu")(x)
        x = layers.Conv2D(base << d, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(base << depth, 3, padding="same", activation="relu")(x)
    for d in reversed(range(depth)):
        x = layers.Conv2DTranspose(base << d, 2, strides=2, padding="same")(x)
        x = layers.Concatenate()([x, skips[d]])
        x = layers.Conv2D(base << d, 3, padding="same", activation="relu")(x)
    return keras.Model(inp, layers.Conv2D(1, 1, activation="sigmoid")(x))


def upsampling(keras: Any, size: int = 512, width: int = 32) -> Any:
    """A PyNET-like image-to-image model: strided convs down, UpSampling2D (nearest) up. Batch 1
    fixed: with a dynamic batch TF 2.21's converter leaves the convs after an UpSampling2D as TF
    ops."""
    layers = keras.layers
    x = inp = keras.Input((size, size, 3), batch_size=1)
    for w in (width, 2 * width, 4 * width):
        x = layers.Conv2D(w, 3, strides=2, padding="same", activation="relu")(x)
    for w in (2 * width, width, width):
        x = layers.UpSampling2D()(x)
        x = layers.Conv2D(w, 3, padding="same", activation="relu")(x)
    return keras.Model(inp, layers.Conv2D(3, 3, padding="same")(x))


def encoder(keras: Any, seq: int = 128, dim: int = 256, heads: int = 4, layers_n: int = 4) -> Any:
    """A transformer encoder: multi-head self-attention, layer norm, a GELU MLP, residuals."""
    layers = keras.layers
    x = inp = keras.Input((seq, dim))
    for _ in range(layers_n):
        a = layers.MultiHeadAttention(heads, dim // heads)(x, x)
        x = layers.LayerNormalization()(x + a)
        h = layers.Dense(4 * dim, activation="gelu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(dim)(h))
    return keras.Model(inp, x)


def convert(tf: Any, model: Any, kind: str) -> bytes:
    """kind: "fp32", "fp16" (float16 weights), "int8" (full-integer PTQ, float I/O) or
    "dynamic" (int8 weights, float activations)."""
    # from_keras_model freezes the variables into constants, as users' conversions do.
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif kind == "dynamic":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif kind == "int8":
        import numpy as np

        rng = np.random.default_rng(0)
        shapes = [(1, *(int(d) for d in t.shape[1:])) for t in model.inputs]

        def representative() -> Any:
            for _ in range(8):  # random inputs: scales that look calibrated, not trained
                yield [rng.standard_normal(s).astype(np.float32) for s in shapes]

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    data: bytes = conv.convert()
    return data


def main(argv: list[str] | None = None) -> int:
    try:
        import tensorflow as tf
    except ImportError:
        print("keras_models: needs TensorFlow (pip install tensorflow-cpu)", file=sys.stderr)
        return 2
    keras = tf.keras
    builders = {
        **_applications(keras),
        "unet_256": lambda: unet(keras),
        "upsampling_512": lambda: upsampling(keras),
        "encoder_4x128x256": lambda: encoder(keras),
    }
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_DIR))
    ap.add_argument("--models", default=",".join(builders))
    ap.add_argument("--fp16", action="store_true", help="also write fp16-weight variants")
    ap.add_argument("--int8", action="store_true", help="also write int8 (PTQ) variants")
    ap.add_argument("--dynamic", action="store_true",
                    help="also write dynamic-range variants (int8 weights, float activations)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in builders]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(builders)}")
    keras.utils.set_random_seed(0)
    failed = []
    for name in names:
        variants = [("fp32", out / f"keras_{name}.tflite")]
        if args.fp16:
            variants.append(("fp16", out / f"keras_{name}_fp16.tflite"))
        if args.int8:
            variants.append(("int8", out / f"keras_{name}_int8.tflite"))
        if args.dynamic:
            variants.append(("dynamic", out / f"keras_{name}_dynamic.tflite"))
        todo = [(kind, p) for kind, p in variants if not p.exists()]
        if not todo:
            continue
        model = builders[name]()
        for kind, p in todo:
            try:
                p.write_bytes(convert(tf, model, kind))
            except Exception as e:  # noqa: BLE001 - one model the converter refuses is reported
                failed.append(f"{p.name}: {type(e).__name__}: {str(e).splitlines()[0]}")
                continue
            print(f"{p}: {p.stat().st_size / 1e6:.1f} MB", flush=True)
        keras.backend.clear_session()
    for f in failed:
        print(f"keras_models: not converted: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
