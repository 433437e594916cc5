"""The int8 GEMM's tile shape (CLGPU_TUNE_GEMM_INT8="TM,TN,TK4,WM,WN", one shape for every
layer) on whole int8 models, against the device's default: one interpreter per shape in one
process, timed in interleaved rounds of invokes (the delegate alone, no CPU runs between), every
output compared bit for bit with TFLite's reference kernels.

    python bench/bench_int8_tiles.py DIR/keras_mobilenet_v2_int8.tflite ... \\
        --tiles 32,32,4,4,4 32,32,8,2,2 64,64,8,8,4 --rounds 10

Results: bench/results/int8-tiles-<device>.{json,md}, a row per model and shape.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import device_info, write_results

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

ENV = "CLGPU_TUNE_GEMM_INT8"
PER_ROUND = 20


def _interpreter(path: str, tiles: str, feeds: list[tuple[int, np.ndarray]]) -> Any:
    # The tiles are read when the partition is planned, which may be at the first invoke.
    old = os.environ.pop(ENV, None)
    if tiles != "default":
        os.environ[ENV] = tiles
    try:
        it = make_interpreter(path, [clgpu_delegate.load(partitioning="all")])
        it.allocate_tensors()
        for i, x in feeds:
            it.set_tensor(i, x)
        for _ in range(3):
            it.invoke()
    finally:
        os.environ.pop(ENV, None)
        if old is not None:
            os.environ[ENV] = old
    return it


def measure(path: str, shapes: list[str], rounds: int) -> list[dict[str, Any]]:
    ref = make_interpreter(path, None, reference=True)
    ref.allocate_tensors()
    rng = np.random.default_rng(0)
    feeds = []
    for det in ref.get_input_details():
        if np.dtype(det["dtype"]).kind == "f":
            x = rng.uniform(-1, 1, det["shape"]).astype(det["dtype"])
        else:
            x = rng.integers(-128, 128, det["shape"]).astype(det["dtype"])
        feeds.append((det["index"], x))
        ref.set_tensor(det["index"], x)
    ref.invoke()
    want = [ref.get_tensor(o["index"]).copy() for o in ref.get_output_details()]
    its = {s: _interpreter(path, s, feeds) for s in shapes}
    times: dict[str, list[float]] = {s: [] for s in shapes}
    for r in range(rounds):
        for s in shapes if r % 2 == 0 else shapes[::-1]:
            it = its[s]
            for _ in range(PER_ROUND):
                t0 = time.perf_counter()
                it.invoke()
                times[s].append((time.perf_counter() - t0) * 1e3)
    rows = []
    for s in shapes:
        got = [its[s].get_tensor(o["index"]) for o in its[s].get_output_details()]
        rows.append(
            {
                "model": Path(path).stem,
                "tiles": s,
                "median_ms": statistics.median(times[s]),
                "bit_exact": all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)),
            }
        )
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("models", nargs="+", help="int8 .tflite files")
    p.add_argument("--tiles", nargs="+", default=["32,32,4,4,4", "32,32,8,2,2", "64,64,8,8,4"])
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    shapes = ["default", *a.tiles]
    rows = []
    for m in a.models:
        for row in measure(m, shapes, a.rounds):
            rows.append(row)
            print(row, flush=True)
    cols = [
        ("model", "model"),
        ("tiles", "tiles (TM,TN,TK4,WM,WN)"),
        ("median_ms", "median ms"),
        ("bit_exact", "bit-exact"),
    ]
    meta = {**device_info(), "rounds": a.rounds, "invokes_per_round": PER_ROUND}
    print(write_results("int8-tiles", meta, rows, cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
