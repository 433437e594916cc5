"""The int8 GEMM split along K on the layers whose outputs have too few tiles to fill a GPU
(batch-1 late layers, FULLY_CONNECTED with one row): each layer timed whole (gemm_splits=1), with
the automatic plan, and with the automatic plan under other CLGPU_SPLITK_THREADS targets
(work-items per compute unit), every output compared bit for bit with TFLite's int8 kernels.

    python bench/bench_int8_splitk.py                 # device time per layer and variant
    python bench/bench_int8_splitk.py --threads 0,512,1024,2048,4096 --runs 50
    CLGPU_TUNE_GEMM_INT8=8,64,4,2,4 python bench/bench_int8_splitk.py --tag tm8   # other tiles

Results: bench/results/int8-splitk[-TAG]-<device>.{json,md}. Timings come from the kernel events
(bench/_common.py): a split GEMM is one launch (its last group per tile applies the output stage).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np
from _common import device_info, time_model, write_results

from clgpu_delegate.modelgen import ModelBuilder, quantize_model
from clgpu_delegate.runtime import make_interpreter

# (name, input NHWC, filters OC, kernel) or (name, rows, K, N) for FULLY_CONNECTED.
LAYERS: list[tuple[Any, ...]] = [
    ("1x1 7x7 960->320", (1, 7, 7, 960), 320, 1),
    ("1x1 7x7 320->1280", (1, 7, 7, 320), 1280, 1),
    ("1x1 7x7 576->160", (1, 7, 7, 576), 160, 1),
    ("1x1 7x7 160->960", (1, 7, 7, 160), 960, 1),
    ("1x1 14x14 576->96", (1, 14, 14, 576), 96, 1),
    ("3x3 7x7 512->512", (1, 7, 7, 512), 512, 3),
    ("3x3 14x14 256->256", (1, 14, 14, 256), 256, 3),
    ("fc 1x1280->1000", 1, 1280, 1000),
    ("fc 1x1024->1000", 1, 1024, 1000),
    ("fc 1x384->8", 1, 384, 8),
]


def layer_model(layer: tuple[Any, ...]) -> bytes:
    b = ModelBuilder(seed=1)
    if len(layer) == 4 and isinstance(layer[1], int):
        _, rows, k, n = layer
        x = b.input("x", (rows, k))
        b.output(b.fully_connected(x, b.rand((n, k)), b.rand((n,), 0.1), activation="RELU6"))
    else:
        _, shape, oc, k = layer
        x = b.input("x", shape)
        w = b.rand((oc, k, k, shape[3]))
        b.output(b.conv2d(x, w, b.rand((oc,), 0.1), padding="SAME", activation="RELU6"))
    return quantize_model(b.build(), io="int8", samples=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument(
        "--threads", default="0,1024,2048,4096", help="CLGPU_SPLITK_THREADS values to try"
    )
    p.add_argument("--splits", default="", help="also force these gemm_splits, e.g. 4,8,16")
    p.add_argument("--tag", default="", help="a suffix of the results' name")
    a = p.parse_args()
    variants: list[tuple[str, dict[str, Any], str | None]] = [
        ("whole", {"gemm_splits": 1}, None),
        ("auto", {}, None),
    ]
    variants += [(f"auto threads={t}", {}, t) for t in a.threads.split(",") if t]
    variants += [(f"splits={s}", {"gemm_splits": int(s)}, None) for s in a.splits.split(",") if s]
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
        for name, options, threads in variants:
            saved = os.environ.pop("CLGPU_SPLITK_THREADS", None)
            if threads is not None:
                os.environ["CLGPU_SPLITK_THREADS"] = threads
            try:
                t = time_model(model, [x], runs=a.runs, warmup=3, **options)
            finally:
                os.environ.pop("CLGPU_SPLITK_THREADS", None)
                if saved is not None:
                    os.environ["CLGPU_SPLITK_THREADS"] = saved
            exact = bool(np.array_equal(t["output"], expected))
            rows.append(
                {
                    "layer": layer[0],
                    "variant": name,
                    "algorithm": t["algorithm"],
                    "kernels": t["kernels"],
                    "ms": t["ms"],
                    "bit_exact": exact,
                }
            )
            print(
                f"{layer[0]:22s} {name:22s} {t['algorithm']:28s} {t['kernels']} kernels "
                f"{1000 * t['ms']:9.2f} us exact {exact}",
                flush=True,
            )
    cols = [
        ("layer", "layer"),
        ("variant", "variant"),
        ("algorithm", "algorithm"),
        ("kernels", "launches"),
        ("ms", "device ms"),
        ("bit_exact", "bit-exact"),
    ]
    meta = device_info()
    meta["CLGPU_TUNE_GEMM_INT8"] = os.environ.get("CLGPU_TUNE_GEMM_INT8", "")
    stem = "int8-splitk" + (f"-{a.tag}" if a.tag else "")
    print(write_results(stem, meta, rows, cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
