"""GEMM throughput of the delegate's FULLY_CONNECTED path (tiled GEMM, GEMV for batch 1)
against the device's FP32 peak, CLBlast (when a libclblast can be loaded) and
numpy/OpenBLAS on the host.

    python bench/bench_gemm.py [--sizes 4096,1024] [--clblast /path/libclblast.so.1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import device_info, time_model, write_results

from clgpu_delegate._native import core
from clgpu_delegate.modelgen import ModelBuilder

# (M, N, K): square problems and batch-1 / small-batch FC layers.
SHAPES = [(4096, 4096, 4096), (2048, 2048, 2048), (1024, 1024, 1024), (1, 1000, 1280),
          (1, 4096, 4096), (1, 1001, 1024), (8, 4096, 4096), (196, 512, 2048)]


def fc_model(m: int, n: int, k: int) -> bytes:
    b = ModelBuilder(seed=0)
    x = b.input("x", (m, k))
    b.output(b.fully_connected(x, b.rand((n, k)), bias=np.zeros(n, np.float32)))
    return b.build()


def peak_gflops(dev: dict) -> float:
    # FP32 FMA lanes: 128 per SM on NVIDIA Hopper/Ampere-class parts.
    return 2 * 128 * dev["compute_units"] * dev["clock_mhz"] / 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clblast", default=None, help="path of libclblast.so to compare with")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--quick", action="store_true", help="small shapes only (CPU devices)")
    args = ap.parse_args()
    dev = device_info()
    peak = peak_gflops(dev) if dev["type"] == "gpu" else float("nan")
    runner = core().KernelRunner("auto") if args.clblast else None
    rng = np.random.default_rng(0)
    rows = []
    shapes = [s for s in SHAPES if max(s) <= 1280] if args.quick else SHAPES
    for m, n, k in shapes:
        a = rng.standard_normal((m, k)).astype(np.float32)
        r = time_model(fc_model(m, n, k), [a], runs=args.runs, precision=args.precision)
        flops = 2.0 * m * n * k
        bytes_moved = 4.0 * (m * k + n * k + m * n)
        row = {"shape": f"{m}x{n}x{k}", "algorithm": r["algorithm"], "ms": r["ms"],
               "gflops": flops / r["ms"] / 1e6, "gbps": bytes_moved / r["ms"] / 1e6}
        row["pct_peak"] = 100 * row["gflops"] / peak if peak == peak else float("nan")
        if runner is not None:
            try:
                ns = runner.clblast_sgemm(args.clblast, m, n, k, args.runs)
                row["clblast_gflops"] = flops / ns
            except Exception as e:  # noqa: BLE001 - the comparison is optional
                row["clblast_gflops"] = f"n/a ({e})"
        bb = rng.standard_normal((n, k)).astype(np.float32)
        t0 = time.perf_counter()
        reps = 3
        for _ in range(reps):
            a @ bb.T
        row["numpy_gflops"] = flops * reps / (time.perf_counter() - t0) / 1e9
        rows.append(row)
        print({k2: (round(v, 3) if isinstance(v, float) else v) for k2, v in row.items()},
              flush=True)
    meta = dev | {"fp32_peak_gflops": peak, "precision": args.precision,
                  "timing": "device time of the delegated kernels from OpenCL events, median"}
    cols = [("shape", "M x N x K"), ("algorithm", "kernel"), ("ms", "ms"),
            ("gflops", "GFLOP/s"), ("pct_peak", "% FP32 peak"), ("gbps", "GB/s"),
            ("clblast_gflops", "CLBlast GFLOP/s"), ("numpy_gflops", "numpy GFLOP/s")]
    print(write_results("gemm", meta, rows, cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
