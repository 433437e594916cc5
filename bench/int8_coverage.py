"""Which nodes of real int8 models the delegate claims, and whether its outputs are bit-exact:
the public corpus's int8 models, TensorFlow's post-training-quantized Keras models
(bench/keras_models.py --int8) and the zoo's int8 versions, against TFLite's reference int8
kernels in each installed runtime.

    python bench/int8_coverage.py [--zoo-size 224] [--public-dir D] [--keras-dir D]

Writes bench/results/int8-coverage-<device>.{json,md}. On a GPU this is also the bit-exactness
check of the device's dot-product path on whole models (`int8_dot` in the results).
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import device_info, write_results

import clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import available_runtimes, make_interpreter

CACHE = Path.home() / ".cache" / "clgpu_delegate"
PUBLIC = ["keyword_spotting_mobilenetv2", "tflite_micro_speech", "audio_example1", "mww_okay_nabu"]
KERAS = ["mobilenet_v2", "efficientnet_b0", "unet_256", "resnet50_v2"]
ZOO = ["mobilenet_v2", "mobilenet_v1", "resnet50", "inception_v1"]


def _inputs(interp: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for d in interp.get_input_details():
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.standard_normal(d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, d["shape"]).astype(dt))
    return out


def _run(interp: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs, strict=True):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def _scales(interp: Any) -> list[float]:
    """Per output: the quantization scale its integers have (a float output: the scale of the
    DEQUANTIZE producing it)."""
    tensors = {d["index"]: d for d in interp.get_tensor_details()}
    producer = {int(t): op for op in interp._get_ops_details() for t in op["outputs"]}
    out = []
    for d in interp.get_output_details():
        s = d["quantization"][0]
        op = producer.get(d["index"])
        if not s and op is not None and op["op_name"] == "DEQUANTIZE":
            s = tensors[int(op["inputs"][0])]["quantization"][0]
        out.append(float(s) if s else 0.0)
    return out


def check(name: str, model: bytes, runtime: str) -> dict[str, Any]:
    ref = make_interpreter(model, runtime=runtime, reference=True)
    inputs = _inputs(ref)
    expected = _run(ref, inputs)
    d = clgpu_delegate.load(partitioning="all")
    got = _run(make_interpreter(model, [d], runtime=runtime, reference=True), inputs)
    n = exact = 0
    worst = 0.0
    for g, e, s in zip(got, expected, _scales(ref), strict=True):
        if g.dtype.kind == "f":  # back to quanta
            g, e = np.round(g / s), np.round(e / s)
        diff = np.abs(g.astype(np.int64) - e.astype(np.int64))
        n += diff.size
        exact += int((diff == 0).sum())
        worst = max(worst, float(diff.max(initial=0)))
    dec = d.decisions()
    cpu = collections.Counter(x["op_name"] or str(x["op"]) for x in dec if not x["delegated"])
    return {
        "model": name,
        "runtime": runtime,
        "int8_dot": d.device.int8_dot,
        "delegated": f"{sum(x['delegated'] for x in dec)}/{len(dec)}",
        "partitions": len(d.partitions()),
        "bit_exact": exact / max(n, 1),
        "max_quanta": worst,
        "cpu_ops": ", ".join(f"{k} x{v}" for k, v in sorted(cpu.items())),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo-size", type=int, default=224)
    p.add_argument("--public-dir", default=str(CACHE / "public-models"))
    p.add_argument("--keras-dir", default=str(CACHE / "keras-models"))
    a = p.parse_args()
    models: list[tuple[str, bytes]] = []
    for name in PUBLIC:
        f = Path(a.public_dir) / f"{name}.tflite"
        if f.is_file():
            models.append((f"public/{name}", f.read_bytes()))
    for name in KERAS:
        f = Path(a.keras_dir) / f"keras_{name}_int8.tflite"
        if f.is_file():
            models.append((f"keras/{name}_int8", f.read_bytes()))
    for name in ZOO:
        models.append((f"zoo/{name}_int8", zoo.path(name, int8=True, size=a.zoo_size).read_bytes()))
    rows = []
    for name, model in models:
        for rt in available_runtimes():
            rows.append(check(name, model, rt))
            print(rows[-1], flush=True)
    cols = [
        ("model", "model"),
        ("runtime", "runtime"),
        ("int8_dot", "dot path"),
        ("delegated", "delegated nodes"),
        ("partitions", "partitions"),
        ("bit_exact", "bit-exact outputs"),
        ("max_quanta", "max quanta"),
        ("cpu_ops", "left on the CPU"),
    ]
    print(write_results("int8-coverage", device_info(), rows, cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
