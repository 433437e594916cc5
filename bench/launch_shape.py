"""What a launch's shape costs the host: the same 25 kernels of 4 buffer arguments launched in
bursts of 25 (an invoke of a small model) as 1-, 2- or 3-dimensional ranges, with the work-group
size given or left to the driver (a null local size: the delegate's launches whose op sets
none), and with 4,096 or 262,144 work-items. The driver alone, as bench/enqueue_probe.py: ctypes
on the OpenCL library, no delegate. Cases in a shuffled order, `--rounds` times.

    python bench/launch_shape.py [--launches 2000] [--rounds 3] [--tag T] [--out DIR]

Writes launch-shape[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import ctypes as C
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from enqueue_probe import BURST, Driver, probe_main  # noqa: E402

KERNELS, ARGS = 25, 4
# dims -> (global, local) for 4,096 items; "large" multiplies the first axis by 64.
SHAPES = {1: ((4096,), (64,)), 2: ((64, 64), (64, 1)), 3: ((16, 16, 16), (16, 4, 1))}


def _source(dims: int) -> str:
    index = " + ".join(f"get_global_id({d}) * {4**d}" for d in range(dims))
    params = ", ".join(f"__global float* a{i}" for i in range(ARGS))
    body = " + ".join(f"a{i}[g & 4095]" for i in range(1, ARGS))
    return "\n".join(
        f"__kernel void k{f}({params}) {{ int g = {index}; a0[g & 4095] = {body} + {f}; }}"
        for f in range(KERNELS)
    )


def _case(drv: Driver, dims: int, local: bool, large: bool, bursts: int) -> float:
    kernels = drv.kernels(_source(dims), [f"k{k}" for k in range(KERNELS)])
    buffers = [drv.buffer() for _ in range(ARGS)]
    for k in kernels:
        drv.set_buffers(k, buffers)
    g, lsz = SHAPES[dims]
    g = (g[0] * (64 if large else 1), *g[1:])
    gsz = (C.c_size_t * dims)(*g)
    lp = (C.c_size_t * dims)(*lsz) if local else None
    cl, times = drv.cl, []
    for b in range(bursts + 20):  # the first 20 bursts warm up
        t0 = time.perf_counter()
        for i, k in enumerate(kernels):
            drv.check(
                cl.clEnqueueNDRangeKernel(drv.q, k, dims, None, gsz, lp, 0, None, None),
                "clEnqueueNDRangeKernel",
            )
            if i == 1 or i % 16 == 15:
                cl.clFlush(drv.q)
        if b >= 20:
            times.append((time.perf_counter() - t0) * 1e6 / BURST)
        cl.clFinish(drv.q)
    for b in buffers:
        cl.clReleaseMemObject(b)
    for k in kernels:
        cl.clReleaseKernel(k)
    return statistics.median(times)


def run(launches: int, rounds: int, seed: int = 0) -> list[dict[str, Any]]:
    drv = Driver()
    cases = [(d, lo, la) for d in SHAPES for lo in (True, False) for la in (False, True)]
    rng = random.Random(seed)
    rows = []
    for r in range(rounds):
        rng.shuffle(cases)
        for dims, local, large in cases:
            us = _case(drv, dims, local, large, max(1, launches // BURST))
            rows.append(
                {
                    "round": r,
                    "dims": dims,
                    "local": "given" if local else "driver's",
                    "items": 4096 * (64 if large else 1),
                    "us_per_launch": us,
                }
            )
            print(rows[-1], flush=True)
    return rows


def _sorted_run(launches: int, rounds: int) -> list[dict[str, Any]]:
    rows = run(launches, rounds)
    return sorted(rows, key=lambda r: (r["dims"], r["local"], r["items"], r["round"]))


def main(argv: list[str] | None = None) -> int:
    columns = [
        ("round", "round"),
        ("dims", "dims"),
        ("local", "work-group size"),
        ("items", "work-items"),
        ("us_per_launch", "enqueue us per launch"),
    ]
    return probe_main(argv, __doc__, "launch-shape", _sorted_run, columns, {"buffer_args": ARGS})


if __name__ == "__main__":
    sys.exit(main())
