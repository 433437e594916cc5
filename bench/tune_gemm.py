"""Sweeps the tunables of the tiled GEMM kernel (gemm_nt in kernels/gemm.cl) on one
square size and reports, per configuration, device time, TFLOP/s, % of FP32 peak,
the compiler's register / spill report (NVIDIA: -cl-nv-verbose) and a correctness
check against numpy. bench/tuning_table.py writes the winner into src_cpp/ops/tuning.json.

    python bench/tune_gemm.py [--size 4096] [--runs 10] [--json out.json]
    python bench/tune_gemm.py --configs 128,128,16,8,8,1,0 --options "-cl-mad-enable"
"""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
from _common import device_info

from clgpu_delegate._native import core

# (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N, GEMM_DBUF, GEMM_TMAP)
CONFIGS = [
    (128, 128, 16, 8, 8, 0, 0), (128, 128, 16, 8, 8, 1, 0), (128, 128, 16, 8, 8, 0, 1),
    (128, 128, 16, 8, 8, 1, 1), (128, 128, 8, 8, 8, 1, 0), (128, 128, 8, 8, 8, 1, 1),
    (128, 128, 32, 8, 8, 1, 0), (128, 64, 16, 8, 4, 1, 0), (64, 128, 16, 4, 8, 1, 0),
    (128, 256, 16, 8, 16, 1, 0), (256, 128, 16, 16, 8, 1, 0), (256, 128, 8, 16, 8, 1, 0),
    (128, 256, 8, 8, 16, 1, 1), (64, 64, 16, 4, 4, 1, 0),
]
OPTIONS = ["", "-cl-mad-enable", "-DLPAD=4"]


def parse(cfg: str) -> tuple[int, ...]:
    return tuple(int(v) for v in cfg.split(","))


def defines(c: tuple[int, ...], extra: str) -> str:
    tm, tn, tk, wm, wn, dbuf, tmap = c
    return (f"-DTILE_M={tm} -DTILE_N={tn} -DTILE_K={tk} -DWPT_M={wm} -DWPT_N={wn} "
            f"-DGEMM_DBUF={dbuf} -DGEMM_TMAP={tmap} {extra}").strip()


def run(runner, c: tuple[int, ...], extra: str, a, b, m: int, n: int, k: int, runs: int):
    tm, tn, tk, wm, wn, *_ = c
    wg = (tm // wm) * (tn // wn)
    glob = ((m + tm - 1) // tm) * ((n + tn - 1) // tn) * wg
    out = np.zeros((m, n), np.float32)
    bias = np.zeros(n, np.float32)
    ns = runner.run("gemm", "gemm_nt", defines(c, extra),
                    [a, b, bias, out, m, n, k, -3.0e38, 3.0e38], [glob], [wg], runs)
    return ns, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--configs", default=None, help="';'-separated TM,TN,TK,WM,WN,DBUF,TMAP")
    ap.add_argument("--options", default=None, help="';'-separated extra build options")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev = device_info()
    peak = 2 * 128 * dev["compute_units"] * dev["clock_mhz"] / 1e3
    runner = core().KernelRunner("auto")
    nvidia = "NVIDIA" in runner.device.vendor
    configs = [parse(c) for c in args.configs.split(";")] if args.configs else CONFIGS
    options = args.options.split(";") if args.options is not None else OPTIONS
    rng = np.random.default_rng(0)
    # Correctness on a ragged size (no dimension a multiple of a tile) or, for GEMM_EVEN builds
    # (whole tiles promised), on a multiple of every tile; timing on a square size.
    checks = {}
    for even, (cm, cn, ck) in ((False, (300, 200, 132)), (True, (512, 256, 128))):
        ca = rng.standard_normal((cm, ck)).astype(np.float32)
        cb = rng.standard_normal((cn, ck)).astype(np.float32)
        checks[even] = (ca, cb, cm, cn, ck, ca.astype(np.float64) @ cb.astype(np.float64).T)
    s = args.size
    a = rng.standard_normal((s, s)).astype(np.float32)
    b = rng.standard_normal((s, s)).astype(np.float32)
    rows = []
    print(f"{dev['device']} driver {dev['driver']}  peak {peak / 1e3:.1f} TFLOP/s  size {s}")
    for c in configs:
        for extra in options:
            row = {"config": ",".join(map(str, c)), "options": extra}
            try:
                verbose = " -cl-nv-verbose" if nvidia else ""
                log = runner.build_log("gemm", defines(c, extra) + verbose)
                # ptxas reports per kernel; keep the lines about registers and spills.
                row["ptxas"] = " | ".join(ln.strip() for ln in log.splitlines()
                                          if re.search(r"registers|spill", ln))[:400]
                ca, cb, cm, cn, ck, ref = checks["GEMM_EVEN=1" in extra]
                _, out = run(runner, c, extra, ca, cb, cm, cn, ck, 1)
                row["max_rel_err"] = float(np.abs(out - ref).max() / np.abs(ref).max())
                ns, _ = run(runner, c, extra, a, b, s, s, s, args.runs)
                row["ms"] = ns / 1e6
                row["tflops"] = 2.0 * s ** 3 / ns / 1e3
                row["pct_peak"] = 100 * row["tflops"] * 1e3 / peak
            except Exception as e:  # a config the device cannot build or run
                row["error"] = str(e).splitlines()[0][:160]
            rows.append(row)
            print(json.dumps(row), flush=True)
    ok = [r for r in rows if "tflops" in r and r["max_rel_err"] < 1e-4]
    if ok:
        best = max(ok, key=lambda r: r["tflops"])
        print(f"best: {best['config']} {best['options']!r} {best['tflops']:.2f} TFLOP/s "
              f"({best['pct_peak']:.1f}% of peak)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "size": s, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
