"""int8 on the device: each dot-product path's bit-exactness and speed (NVIDIA dp4a through
inline PTX vs the portable integer path), and the zoo's int8 models against TFLite's CPU.

    python bench/bench_int8.py                     # layers with every path, then the models
    python bench/bench_int8.py --layers            # only the layers
    python bench/bench_int8.py --models mobilenet_v2,resnet50 --runs 100
    python bench/bench_int8.py --models DIR/keras_mobilenet_v2_int8.tflite
    python bench/bench_int8.py --models ... --block 25 --tag blocks   # turns of 25 runs each

Layers: single int8 CONV_2D / FULLY_CONNECTED models with the shapes of MobileNetV2 and
ResNet-50 layers (per-channel weights, calibrated scales), run once per dot-product path in a
child process (CLGPU_INT8_DOT=dp4a|khr|portable; the path that really ran is what the delegate
reports), compared bit for bit with TFLite's reference int8 kernels and timed from the kernel
events. Models: zoo.path(name, int8=True) (float I/O, QUANTIZE/DEQUANTIZE at the ends), every
output element compared in quanta with the reference kernels, then clgpu_delegate.bench's
alternating median against the default CPU interpreter (XNNPACK int8). Results:
bench/results/int8-layers-<device>.{json,md} and int8-models-<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_turn_arguments, device_info, time_model, write_results

import clgpu_delegate
from clgpu_delegate.bench import run_benchmark
from clgpu_delegate.modelgen import ModelBuilder, quantize_model, zoo
from clgpu_delegate.runtime import make_interpreter

# (name, input NHWC, filters OC, kernel, stride) or (name, rows, K, N) for FULLY_CONNECTED.
LAYERS: list[tuple[Any, ...]] = [
    ("mnv2 1x1 expand 56x56 24->144", (1, 56, 56, 24), 144, 1, 1),
    ("mnv2 1x1 project 28x28 192->32", (1, 28, 28, 192), 32, 1, 1),
    ("mnv2 1x1 7x7 960->320", (1, 7, 7, 960), 320, 1, 1),
    ("mnv2 first 3x3/2 224 3->32", (1, 224, 224, 3), 32, 3, 2),
    ("resnet 3x3 56x56 64->64", (1, 56, 56, 64), 64, 3, 1),
    ("resnet 3x3 14x14 256->256", (1, 14, 14, 256), 256, 3, 1),
    ("resnet 1x1 28x28 512->128", (1, 28, 28, 512), 128, 1, 1),
    ("fc 1x1280->1000", 1, 1280, 1000),
]
PATHS = ("dp4a", "khr", "portable")
MODELS = ("mobilenet_v2", "mobilenet_v1", "resnet50", "inception_v1")


def layer_model(layer: tuple[Any, ...]) -> bytes:
    b = ModelBuilder(seed=1)
    if len(layer) == 4:
        _, rows, k, n = layer
        x = b.input("x", (rows, k))
        b.output(b.fully_connected(x, b.rand((n, k)), b.rand((n,), 0.1)))
    else:
        _, shape, oc, k, s = layer
        x = b.input("x", shape)
        b.output(b.conv2d(x, b.rand((oc, k, k, shape[3])), b.rand((oc,), 0.1), stride=s))
    return quantize_model(b.build(), io="int8", samples=1)


def quanta(got: np.ndarray, ref: np.ndarray) -> tuple[float, int]:
    diff = np.abs(got.astype(np.int64) - ref.astype(np.int64))
    return float((diff == 0).mean()), int(diff.max(initial=0))


def run_layers_child() -> list[dict[str, Any]]:
    """This process's path (CLGPU_INT8_DOT) over LAYERS: exactness and median kernel time."""
    rows = []
    for layer in LAYERS:
        model = layer_model(layer)
        ref = make_interpreter(model, reference=True)
        ref.allocate_tensors()
        d = ref.get_input_details()[0]
        x = np.random.default_rng(0).integers(-128, 128, d["shape"]).astype(np.int8)
        ref.set_tensor(d["index"], x)
        ref.invoke()
        expected = ref.get_tensor(ref.get_output_details()[0]["index"])
        t = time_model(model, [x], runs=20, warmup=3)
        exact, worst = quanta(t["output"], expected)
        flops = (
            2.0
            * np.prod(expected.shape)
            * (layer[2] if len(layer) == 4 else layer[3] * layer[3] * layer[1][3])
        )
        rows.append(
            {
                "layer": layer[0],
                "algorithm": t["algorithm"],
                "ms": t["ms"],
                "gops": flops / t["ms"] / 1e6,
                "bit_exact": exact,
                "max_quanta": worst,
            }
        )
    return rows


def run_layers() -> None:
    rows = []
    for path in PATHS:
        env = dict(os.environ, CLGPU_INT8_DOT=path)
        out = subprocess.run(
            [sys.executable, __file__, "--layers-child"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for r in json.loads(out.strip().splitlines()[-1]):
            r["asked"] = path
            rows.append(r)
            print(
                f"{path:9s} {r['layer']:36s} {r['algorithm']:32s} {r['ms']:8.4f} ms "
                f"{r['gops']:9.1f} GOP/s exact {100 * r['bit_exact']:.2f} % "
                f"max {r['max_quanta']} q"
            )
    cols = [
        ("asked", "path asked"),
        ("layer", "layer"),
        ("algorithm", "ran (algorithm/path)"),
        ("ms", "kernel ms"),
        ("gops", "GOP/s"),
        ("bit_exact", "bit-exact"),
        ("max_quanta", "max quanta"),
    ]
    print(write_results("int8-layers", device_info(), rows, cols))


def output_scale(interp: Any) -> float:
    """The scale of the quantized tensor the first output is dequantized from."""
    out = interp.get_output_details()[0]["index"]
    tensors = {d["index"]: d for d in interp.get_tensor_details()}
    for op in interp._get_ops_details():
        if out in op["outputs"] and op["op_name"] == "DEQUANTIZE":
            return float(tensors[int(op["inputs"][0])]["quantization"][0])
    return 1.0


def run_models(names: list[str], runs: int, block: int, tag: str) -> None:
    rows = []
    paths: set[str] = set()
    for name in names:
        # A .tflite file (e.g. keras_mobilenet_v2_int8.tflite from keras_models.py --int8), or
        # a zoo model's int8 version.
        path = Path(name) if name.endswith(".tflite") else zoo.path(name, int8=True)
        name = path.stem if name.endswith(".tflite") else name
        ref = make_interpreter(str(path), reference=True)
        ref.allocate_tensors()
        d = ref.get_input_details()[0]
        x = np.random.default_rng(0).standard_normal(d["shape"]).astype(np.float32)
        ref.set_tensor(d["index"], x)
        ref.invoke()
        expected = ref.get_tensor(ref.get_output_details()[0]["index"])
        rep = run_benchmark(
            str(path), runs=runs, progress=False, partitioning="all", block=block
        )
        cpu, dev = rep["results"]
        # The delegate's output (after the DEQUANTIZE) in quanta of that DEQUANTIZE's input.
        dl = clgpu_delegate.load(partitioning="all")
        paths.add(dl.device.int8_dot or "-")
        it = make_interpreter(str(path), [dl])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        worst = float(np.abs(got - expected).max()) / output_scale(ref)
        rows.append(
            {
                "model": name,
                "cpu_ms": cpu["median_ms"],
                "delegate_ms": dev["median_ms"],
                "speedup": rep["speedup"],
                "partitions": dev.get("partitions"),
                "delegated": f"{dev.get('delegated_nodes')}/{dev.get('total_nodes')}",
                "exact_outputs": float((got == expected).mean()),
                "max_quanta_est": round(worst, 3),
            }
        )
        print(rows[-1])
    cols = [
        ("model", "model (int8, float I/O)"),
        ("cpu_ms", "CPU ms (XNNPACK)"),
        ("delegate_ms", "delegate ms"),
        ("speedup", "speedup"),
        ("partitions", "partitions"),
        ("delegated", "delegated nodes"),
        ("exact_outputs", "bit-exact outputs"),
        ("max_quanta_est", "max diff (output steps)"),
    ]
    # The dot-product path the int8 kernels ran with (the device's choice, as `devices` shows).
    meta = device_info() | {"int8_dot_path": ",".join(sorted(paths))}
    print(write_results("int8-models" + (f"-{tag}" if tag else ""), meta, rows, cols))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", action="store_true", help="only the layers")
    p.add_argument(
        "--models",
        default=None,
        help=f"comma-separated zoo names or .tflite paths (default {','.join(MODELS)})",
    )
    p.add_argument("--runs", type=int, default=50)
    add_turn_arguments(p)
    p.add_argument("--layers-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.layers_child:
        print(json.dumps(run_layers_child(), default=float))
        return 0
    if a.models is None:
        run_layers()
    if not a.layers:
        run_models((a.models or ",".join(MODELS)).split(","), a.runs, a.block, a.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
