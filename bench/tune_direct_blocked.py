"""Sweeps the register blocking of the blocked direct convolution (kernels/conv2d_blocked.cl: PX
output pixels x OCB output channels per work-item, WGX x WGY work-items per group) through
CLGPU_TUNE_DIRECT_BLOCKED on the convolutions it is meant for: few output channels at high
resolution. Per (shape, config) one JSON line: device time, TFLOP/s, % of the FP32 peak, the
error against the default algorithm and, on NVIDIA, the compiler's register / spill report. The
winner goes into src_cpp/ops/tuning.json through bench/tuning_table.py.

    python bench/tune_direct_blocked.py [--scale 1] [--runs 3] [--shapes 0,1,2]
    python bench/tune_direct_blocked.py --configs "8,16,32,4;4,32,32,4" --peak-gflops 66908

--scale S divides H and W by S (e.g. 8 on a CPU OpenCL device). Configs whose effective blocking
for a shape repeats an earlier one (OCB is capped by the output channels) are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np
from _common import device_info, time_model
from bench_conv2d import conv_model

from clgpu_delegate._native import core

# (C_in, H, W, kernel, C_out); stride 1, SAME padding, batch 1.
SHAPES = [(16, 2880, 3968, 3, 16), (32, 1440, 1984, 3, 32), (32, 1440, 1984, 7, 32),
          (4, 1440, 1984, 3, 32), (32, 1440, 1984, 3, 3), (16, 2880, 3968, 3, 3),
          (512, 90, 124, 3, 3)]
# (PX, OCB, WGX, WGY): up to 128 accumulators per work-item (the 255-register limit leaves room
# for the input segment and one weight vector), groups of 128 in three shapes, and the narrow
# blocks OC = 3 heads end up with (OCB is capped at OC there).
CONFIGS = [(8, 16, 32, 4), (8, 16, 64, 2), (8, 16, 16, 8), (4, 32, 32, 4), (4, 32, 64, 2),
           (4, 16, 32, 4), (8, 8, 32, 4), (4, 8, 32, 4), (16, 8, 32, 4), (8, 4, 32, 4),
           (16, 4, 32, 4), (16, 4, 64, 2)]
ENTRIES = ("CLGPU_TUNE_DIRECT_BLOCKED", "CLGPU_TUNE_DIRECT_BLOCKED_THIN")


def parse(cfg: str) -> tuple[int, ...]:
    return tuple(int(v) for v in cfg.split(","))


def effective_ocb(ocb: int, oc: int) -> int:
    # As BlockedFor in src_cpp/ops/conv2d_selector.cc: OC spread evenly over the fewest blocks of
    # at most OCB, rounded up to a multiple of 4 when OC is one.
    if ocb < 1:
        return ocb  # invalid: the delegate says so
    blocks = -(-oc // ocb)
    even = -(-oc // blocks)
    up = -(-even // 4) * 4
    return up if oc % 4 == 0 and up <= ocb else even


def defines(c: int, k: int, oc: int, cfg: tuple[int, ...], half: bool) -> str:
    # The build the delegate makes for this shape (but for groups it shrinks to a small layer).
    px, ocb, wgx, wgy = cfg
    vec_out = int(oc % 4 == 0 and ocb % 4 == 0)
    d = (f"-DPX={px} -DOCB={ocb} -DWGX={wgx} -DWGY={wgy} -DKW={k} -DSW=1 -DDW=1 "
         f"-DCV={4 if c % 4 == 0 else 1} -DVEC_OUT={vec_out}")
    return d + (" -DSTORAGE_HALF" if half else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default=None, help="comma-separated indices into SHAPES")
    ap.add_argument("--configs", default=None, help="';'-separated PX,OCB,WGX,WGY")
    ap.add_argument("--peak-gflops", type=float, default=66908.0,
                    help="FP32 peak (default: an H200 SXM, 132 SMs x 128 lanes x 2 x 1.98 GHz)")
    ap.add_argument("--reference", default="auto", help="conv_algorithm checked against")
    ap.add_argument("--tol", type=float, default=1e-3, help="max error / max |reference|")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--json", default=None, help="also write all rows here")
    args = ap.parse_args()
    dev = device_info()
    runner = core().KernelRunner("auto")
    nvidia = "NVIDIA" in runner.device.vendor
    configs = [parse(c) for c in args.configs.split(";")] if args.configs else CONFIGS
    idx = [int(i) for i in args.shapes.split(",")] if args.shapes else range(len(SHAPES))
    print(f"{dev['device']} driver {dev['driver']}  peak {args.peak_gflops / 1e3:.1f} TFLOP/s",
          flush=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in idx:
        c, h, w, k, oc = SHAPES[i]
        h, w = max(h // args.scale, k), max(w // args.scale, k)
        shape = f"{c}x{h}x{w} k{k} ->{oc}"
        flops = 2.0 * h * w * oc * k * k * c
        model = conv_model(c, h, w, k, oc)
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
        ref = time_model(model, [x], runs=args.runs, conv_algorithm=args.reference,
                         precision=args.precision)
        ref_out = ref.pop("output")
        scale = float(np.abs(ref_out).max()) or 1.0
        row = {"shape": shape, "config": "reference", "algorithm": ref["algorithm"],
               "ms": ref["ms"], "tflops": flops / ref["ms"] / 1e9,
               "pct_peak": 100 * flops / ref["ms"] / 1e6 / args.peak_gflops}
        rows.append(row)
        print(json.dumps(row), flush=True)
        seen = set()
        for cfg in configs:
            px, ocb, wgx, wgy = cfg
            eff = (px, effective_ocb(ocb, oc), wgx, wgy)
            if eff in seen:
                continue
            seen.add(eff)
            row = {"shape": shape, "config": ",".join(map(str, cfg)), "ocb": eff[1]}
            for name in ENTRIES:
                os.environ[name] = row["config"]
            try:
                if nvidia:
                    log = runner.build_log("conv2d_blocked",
                                           defines(c, k, oc, eff, args.precision == "fp16")
                                           + " -cl-nv-verbose")
                    row["ptxas"] = " | ".join(ln.strip() for ln in log.splitlines()
                                              if re.search(r"registers|spill", ln))[:300]
                r = time_model(model, [x], runs=args.runs, conv_algorithm="direct_blocked",
                               precision=args.precision)
                out = r.pop("output")
                row["ms"] = r["ms"]
                row["tflops"] = flops / r["ms"] / 1e9
                row["pct_peak"] = 100 * row["tflops"] * 1e3 / args.peak_gflops
                row["speedup_vs_reference"] = ref["ms"] / r["ms"]
                row["max_rel_err"] = float(np.abs(out - ref_out).max()) / scale
                row["ok"] = row["max_rel_err"] <= args.tol and r["algorithm"] == "direct_blocked"
                del out
            except Exception as e:  # a config the device cannot build or run
                row["error"] = str(e).splitlines()[0][:160]
            finally:
                for name in ENTRIES:
                    os.environ.pop(name, None)
            rows.append(row)
            print(json.dumps(row), flush=True)
        ok = [r for r in rows if r["shape"] == shape and r.get("ok")]
        if ok:
            best = max(ok, key=lambda r: r["tflops"])
            print(f"best for {shape}: {best['config']} {best['tflops']:.2f} TFLOP/s "
                  f"({best['pct_peak']:.1f}% of peak, {best['speedup_vs_reference']:.2f}x "
                  f"{ref['algorithm']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "peak_gflops": args.peak_gflops, "scale": args.scale,
                       "precision": args.precision, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
