"""The 35-shape convolution set (from a high-resolution image model on a mobile GPU):
every applicable algorithm, time, GFLOP/s, % of roofline, and the selector's pick.

    python bench/bench_conv2d.py [--scale 1] [--runs 3] [--shapes 0,5,9]

--scale S divides H and W by S (e.g. 8 on a CPU OpenCL device). Times are the device
time of the delegated kernels (OpenCL events), median of --runs after a warm-up.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import device_info, time_model, write_results

from clgpu_delegate._native import core
from clgpu_delegate.modelgen import ModelBuilder

# (C_in, H, W, kernel, C_out); stride 1, SAME padding, batch 1.
SHAPES = [(4, 1440, 1984, 3, 32), (32, 1440, 1984, 3, 32), (32, 720, 992, 3, 64),
          (64, 720, 992, 3, 64), (64, 360, 496, 3, 128), (128, 360, 496, 3, 128),
          (128, 180, 248, 3, 256), (256, 180, 248, 3, 256), (256, 90, 124, 3, 512),
          (512, 90, 124, 3, 512), (512, 180, 248, 3, 256), (512, 90, 124, 3, 3),
          (256, 360, 496, 3, 128), (256, 180, 248, 3, 3), (256, 360, 496, 5, 128),
          (128, 360, 496, 5, 128), (512, 360, 496, 3, 128), (128, 720, 992, 3, 64),
          (128, 360, 496, 3, 3), (128, 720, 992, 5, 64), (64, 720, 992, 5, 64),
          (192, 720, 992, 3, 64), (192, 720, 992, 5, 64), (192, 720, 992, 7, 64),
          (64, 720, 992, 7, 64), (256, 720, 992, 3, 64), (256, 720, 992, 5, 64),
          (64, 1440, 1984, 3, 32), (64, 720, 992, 3, 3), (32, 1440, 1984, 5, 32),
          (32, 1440, 1984, 7, 32), (32, 1440, 1984, 9, 32), (16, 2880, 3968, 3, 16),
          (32, 1440, 1984, 3, 3), (16, 2880, 3968, 3, 3)]
ALGORITHMS = ["direct", "implicit_gemm", "winograd", "winograd4", "gemm", "direct_blocked",
              "winograd4_fused"]


def applies(algo: str, k: int) -> bool:
    # F(4x4) runs filters over 3x3 as sums of 3x3 sub-filters (conv2d_winograd4.cl), fused or not.
    return {"gemm": k == 1, "winograd": k == 3, "winograd4": 3 <= k <= 9,
            "winograd4_fused": 3 <= k <= 9}.get(algo, True)


def conv_model(c: int, h: int, w: int, k: int, oc: int) -> bytes:
    b = ModelBuilder(seed=0)
    x = b.input("x", (1, h, w, c))
    b.output(b.conv2d(x, b.rand((oc, k, k, c)), bias=b.rand((oc,), scale=0.1), padding="SAME"))
    return b.build()


def bandwidth_gbps() -> float:
    """Device memory bandwidth, measured with the ADD kernel (2 reads + 1 write)."""
    r = core().KernelRunner("auto")
    n = 64 << 20
    a, b, c = (np.ones(n, np.float32) for _ in range(3))
    ns = r.run("add", "add_same", "", [a, b, c, n, -1e30, 1e30], [n // 4], [], 5)
    return 3 * 4 * n / ns


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default=None, help="comma-separated indices into the set")
    ap.add_argument("--precision", default="fp32")
    args = ap.parse_args()
    dev = device_info()
    peak = 2 * 128 * dev["compute_units"] * dev["clock_mhz"] / 1e3  # GFLOP/s, FP32 FMA lanes
    bw = bandwidth_gbps()
    idx = [int(i) for i in args.shapes.split(",")] if args.shapes else range(len(SHAPES))
    rows = []
    rng = np.random.default_rng(0)
    for i in idx:
        c, h, w, k, oc = SHAPES[i]
        h, w = max(h // args.scale, k), max(w // args.scale, k)
        model = conv_model(c, h, w, k, oc)
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
        flops = 2.0 * h * w * oc * k * k * c
        bytes_min = 4.0 * (h * w * c + h * w * oc + oc * k * k * c)
        roof_ms = max(flops / peak / 1e6, bytes_min / bw / 1e6)
        row = {"shape": f"{c}x{h}x{w} k{k} ->{oc}", "gflop": flops / 1e9}
        ref = None
        for algo in ALGORITHMS:
            if not applies(algo, k):
                continue
            r = time_model(model, [x], runs=args.runs, conv_algorithm=algo,
                           precision=args.precision)
            row[f"{algo}_ms"] = r["ms"]
            if ref is None:
                ref = r["output"]
            else:
                err = float(np.abs(r["output"] - ref).max() / (np.abs(ref).max() or 1))
                row["max_rel_diff"] = max(row.get("max_rel_diff", 0.0), err)
        pick = time_model(model, [x], runs=args.runs, precision=args.precision)
        row["selected"] = pick["algorithm"]
        row["selected_ms"] = pick["ms"]
        times = {a: row[f"{a}_ms"] for a in ALGORITHMS if f"{a}_ms" in row}
        best = min(times, key=times.get)
        row["best"] = best
        row["pick_within_10pct"] = pick["ms"] <= 1.1 * times[best]
        row["pct_roofline"] = 100 * roof_ms / times[best]
        row["best_tflops"] = flops / times[best] / 1e9
        for a in ("implicit_gemm", "winograd", "winograd4", "direct_blocked", "winograd4_fused"):
            if f"{a}_ms" in row:
                row[f"{a}_speedup"] = row["direct_ms"] / row[f"{a}_ms"]
        rows.append(row)
        print({k2: (round(v, 3) if isinstance(v, float) else v) for k2, v in row.items()},
              flush=True)
    ok = sum(r["pick_within_10pct"] for r in rows)
    meta = dev | {"fp32_peak_gflops": peak, "measured_bandwidth_gbps": bw,
                  "scale": args.scale, "precision": args.precision,
                  "selector_within_10pct": f"{ok}/{len(rows)}",
                  "timing": "device time of the delegated kernels (OpenCL events), median"}
    cols = [("shape", "shape"), ("gflop", "GFLOP"), ("direct_ms", "direct ms"),
            ("implicit_gemm_ms", "implicit GEMM ms"), ("winograd_ms", "Winograd F2 ms"),
            ("winograd4_ms", "Winograd F4 ms"), ("winograd4_fused_ms", "F4 fused ms"),
            ("direct_blocked_ms", "blocked ms"),
            ("implicit_gemm_speedup", "iGEMM/direct"), ("winograd4_speedup", "F4/direct"),
            ("winograd4_fused_speedup", "F4 fused/direct"),
            ("direct_blocked_speedup", "blocked/direct"), ("best", "best"),
            ("best_tflops", "best TFLOP/s"),
            ("pct_roofline", "% roofline"), ("selected", "selector"),
            ("pick_within_10pct", "pick within 10%")]
    print(write_results("conv2d", meta, rows, cols))
    print(f"selector within 10% of best on {ok}/{len(rows)} shapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
