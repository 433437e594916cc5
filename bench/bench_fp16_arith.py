"""Would half arithmetic pay on this device? The delegate's fp16 is half storage with float
arithmetic; this measures what half arithmetic would give: the multiply-add rate in float,
half and half2 (where the device compiles half arithmetic, advertised or not), and the error
of a dot product summed in half against one summed in float, at the reduction lengths of
real convolutions.

    python bench/bench_fp16_arith.py [--iters 4096]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import device_info, write_results

import clgpu_delegate as cd
from clgpu_delegate._native import core

# Four independent chains per work-item keep the FMA pipes busy; ITERS steps each.
RATE_SRC = """
#ifdef USE_HALF
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif
__kernel void rate(__global float* out, float af, float bf, int iters) {
  const VT a = (VT)(af), b = (VT)(bf);
  VT x0 = (VT)(0.1f), x1 = (VT)(1.1f), x2 = (VT)(2.1f), x3 = (VT)(3.1f);
  for (int i = 0; i < iters; ++i) {
    x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
  }
  const VT s = x0 + x1 + x2 + x3;
  out[get_global_id(0)] = SUM(s);
}
"""
RATE_TYPES = {
    "float": ("-DVT=float -DSUM(v)=(v)", 1),
    "half": ("-DUSE_HALF -DVT=half -DSUM(v)=(float)(v)", 1),
    "half2": ("-DUSE_HALF -DVT=half2 -DSUM(v)=(float)((v).x+(v).y)", 2),
}

# out[r] = sum_k a[r, k] * b[k], products and sum in ACC (half or float); inputs rounded to
# half first in both, so the only difference is where the arithmetic happens.
DOT_SRC = """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void dot(__global const half* a, __global const half* b, __global float* out, int k) {
  const int r = get_global_id(0);
  ACC s = (ACC)0;
  for (int i = 0; i < k; ++i) s += (ACC)vload_half(r * k + i, a) * (ACC)vload_half(i, b);
  out[r] = (float)s;
}
"""


def rate_rows(runner, dev: dict, iters: int) -> list[dict]:
    rows = []
    n = dev["compute_units"] * 2048 * 4
    for name, (opts, lanes) in RATE_TYPES.items():
        row = {"test": f"multiply-add rate, {name}"}
        if name != "float" and not dev["fp16"]:
            rows.append(row | {"result": "no half arithmetic on this device"})
            continue
        out = np.zeros(n, np.float32)
        ns = min(
            runner.run_source(RATE_SRC, "rate", opts, [out, 0.999, 0.001, iters], [n])
            for _ in range(5)
        )
        tflops = n * 4 * iters * 2 * lanes / ns / 1e3
        rows.append(row | {"ms": ns / 1e6, "tflops": tflops, "result": f"{tflops:.1f} TFLOP/s"})
    return rows


def dot_rows(runner, dev: dict) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    r = 1024
    for k in (9, 64, 576, 4608):  # depthwise 3x3, small 1x1, 3x3x64, 3x3x512
        row = {"test": f"dot product of {k} summed in half"}
        if not dev["fp16"]:
            rows.append(row | {"result": "no half arithmetic on this device"})
            continue
        a = rng.standard_normal((r, k)).astype(np.float16)
        b = (rng.standard_normal(k) / np.sqrt(k)).astype(np.float16)
        got = {}
        for acc in ("float", "half"):
            out = np.zeros(r, np.float32)
            runner.run_source(DOT_SRC, "dot", f"-DACC={acc}", [a, b, out, k], [r])
            got[acc] = out
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = {acc: float(np.abs(got[acc] - ref).max() / np.abs(ref).max()) for acc in got}
        rows.append(
            row
            | {
                "rel_err_float": err["float"],
                "rel_err_half": err["half"],
                "result": f"max rel err {err['half']:.1e} (float sum {err['float']:.1e})",
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=4096)
    args = ap.parse_args()
    dev = device_info()
    # The probe (compiling half arithmetic) runs in the full device listing only.
    chosen = cd.select_device("auto").index
    dev["fp16"] = next(d.fp16 for d in cd.devices(probe_fp16=True) if d.index == chosen)
    runner = core().KernelRunner("auto")
    rows = rate_rows(runner, dev, args.iters) + dot_rows(runner, dev)
    for row in rows:
        print(row["test"], "->", row["result"], flush=True)
    meta = dev | {
        "half arithmetic": "compiles (probed)" if dev["fp16"] else "not available",
        "timing": "kernel time from OpenCL events, best of 5",
        "error": "max |sum - float64 sum| / max |float64 sum| over 1024 rows, inputs in half",
    }
    cols = [("test", "test"), ("result", "result")]
    print(write_results("fp16-arith", meta, rows, cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
