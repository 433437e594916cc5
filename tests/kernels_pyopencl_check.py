#!/usr/bin/env python3
"""Scratch check of the compute kernels in kernels/*.cl against numpy, through pyopencl.

Standalone (not collected by pytest): `.venv/bin/python tests/kernels_pyopencl_check.py [-k NAME]`.
Each kernel runs on odd shapes (sizes that tiles do not divide, stride 2, dilation 2, SAME/VALID
padding, batch 2, channel counts not a multiple of 4) in fp32 storage (max relative error <= 1e-4)
and with -DSTORAGE_HALF on half buffers (<= 1e-2). Prints one summary line per kernel and exits
non-zero when any case fails. Uses kernels/common.cl when it exists, else the fallback block of
kernels_pyopencl/common.py. The parts (context and references, checks, --bench) are in
tests/kernels_pyopencl/.
"""

from __future__ import annotations

import argparse
import sys
import time

import pyopencl as cl
from kernels_pyopencl.bench import bench
from kernels_pyopencl.checks import CHECKS
from kernels_pyopencl.common import Ctx


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="run only the checks whose name contains this")
    ap.add_argument(
        "--own-common",
        action="store_true",
        help="ignore kernels/common.cl, use the fallback macros",
    )
    ap.add_argument("-v", action="store_true", help="print every case")
    ap.add_argument(
        "--bench", action="store_true", help="time GPU-sized shapes instead of checking"
    )
    ap.add_argument(
        "--fp", choices=["fp32", "fp16", "both"], default="both", help="storage precisions to run"
    )
    args = ap.parse_args()
    cx = Ctx(args.own_common)
    dev = cx.ctx.devices[0]
    print(f"device: {dev.name} ({dev.platform.name}); common: {cx.common_name}")
    precisions = {"fp32": (False,), "fp16": (True,), "both": (False, True)}[args.fp]
    if args.bench:
        for half in precisions:
            bench(cx, half, args.k)
        return 0
    failed = 0
    t_all = time.time()
    for name, fn in CHECKS.items():
        if args.k not in name:
            continue
        for half in precisions:
            t0 = time.time()
            try:
                res = fn(cx, half)
            except cl.Error as e:  # build or launch failure: report and go on with the next check
                print(f"FAIL {name:24s} {'fp16' if half else 'fp32'}: {e}")
                failed += 1
                continue
            bad = [r for r in res if not (r[1] <= r[2])]
            worst = max(res, key=lambda r: r[1] / r[2] if r[2] else float(r[1] > 0) * 1e30)
            if args.v or bad:
                for r in res:
                    mark = "ok " if r[1] <= r[2] else "BAD"
                    print(f"    {mark} {r[0]}: rel err {r[1]:.2e} (tol {r[2]:.0e})")
            status = "ok  " if not bad else "FAIL"
            print(
                f"{status} {name:24s} {'fp16' if half else 'fp32'}: "
                f"{len(res) - len(bad)}/{len(res)} cases, worst rel err {worst[1]:.2e} "
                f"(tol {worst[2]:.0e}) [{worst[0]}], {time.time() - t0:.1f}s"
            )
            failed += bool(bad)
    verdict = "all checks passed" if not failed else f"{failed} check(s) failed"
    print(f"{verdict} in {time.time() - t_all:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", module="pyopencl")  # PoCL's "loop not unrolled" remarks
    sys.exit(main())
