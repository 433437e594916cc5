"""The OpenCL driver's host cost of one kernel launch, by what the launches differ in: how many
kernels take turns, how many buffer arguments they have, whether the buffers are distinct, and
whether the arguments are set again before each launch. No delegate and no model: ctypes on the
OpenCL library, one small kernel per launch (4096 work-items in groups of 64).

A stream enqueues `--launches` commands and waits once; a burst enqueues 25 and waits, as one
invoke of a small model does. Each case runs `--rounds` times; the table has the smallest and the
median per-launch enqueue time (host time until the last command was enqueued) and the wall
time per launch (until the wait returned). Then how an invoke's end waits: bursts of 1, 4 and
25 kernels and a 4-byte read, waited for by clFinish, by the read blocking, by clWaitForEvents on
a marker, or by polling the marker's status (a spinning host thread instead of a sleeping one).

    python bench/enqueue_probe.py [--launches 2000] [--rounds 3] [--tag T] [--out bench/results]

Writes enqueue-probe[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import ctypes as C
import ctypes.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, device_info, write_results  # noqa: E402

P = C.c_void_p
ITEMS, GROUP, BURST = 4096, 64, 25
WAITS = {
    "finish": "clFinish",
    "read": "the read blocking",
    "event": "marker, clWaitForEvents",
    "poll": "marker, status polled",
}
CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL = 1 << 2, 0xFFFFFFFF


class Driver:
    """One context and in-order queue on the first GPU (else the first device)."""

    def __init__(self) -> None:
        name = os.environ.get("CLGPU_OPENCL_LIBRARY") or ctypes.util.find_library("OpenCL")
        self.cl = cl = C.CDLL(name or "libOpenCL.so.1")
        for f in (
            "clCreateContext",
            "clCreateCommandQueue",
            "clCreateBuffer",
            "clCreateProgramWithSource",
            "clCreateKernel",
        ):
            getattr(cl, f).restype = P
        n = C.c_uint()
        plats = (P * 16)()
        self.check(cl.clGetPlatformIDs(16, plats, C.byref(n)), "clGetPlatformIDs")
        self.dev = P()
        found = False
        for kind in (CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL):
            for i in range(n.value):
                if cl.clGetDeviceIDs(P(plats[i]), C.c_ulong(kind), 1, C.byref(self.dev), None) == 0:
                    found = True
                    break
            if found:
                break
        if not found:
            raise SystemExit("error: no OpenCL device")
        err = C.c_int()
        self.ctx = P(cl.clCreateContext(None, 1, C.byref(self.dev), None, None, C.byref(err)))
        self.check(err.value, "clCreateContext")
        self.q = P(cl.clCreateCommandQueue(self.ctx, self.dev, C.c_ulong(0), C.byref(err)))
        self.check(err.value, "clCreateCommandQueue")
        self.gsz, self.lsz = (C.c_size_t * 1)(ITEMS), (C.c_size_t * 1)(GROUP)

    @staticmethod
    def check(code: int, what: str) -> None:
        if code != 0:
            raise SystemExit(f"error: {what} returned {code}")

    def buffer(self) -> P:
        err = C.c_int()
        b = P(
            self.cl.clCreateBuffer(
                self.ctx, C.c_ulong(1), C.c_size_t(ITEMS * 4), None, C.byref(err)
            )
        )
        self.check(err.value, "clCreateBuffer")
        return b

    def sub_buffers(self, count: int) -> list[P]:
        """`count` sub-buffers of one buffer, each the size of buffer()'s, 64 KiB apart (any
        device's base address alignment)."""
        step = 1 << 16
        err = C.c_int()
        parent = P(
            self.cl.clCreateBuffer(
                self.ctx, C.c_ulong(1), C.c_size_t(count * step), None, C.byref(err)
            )
        )
        self.check(err.value, "clCreateBuffer")
        self.cl.clCreateSubBuffer.restype = P
        out = []
        for i in range(count):
            region = (C.c_size_t * 2)(i * step, ITEMS * 4)
            b = P(
                self.cl.clCreateSubBuffer(
                    parent, C.c_ulong(1), C.c_uint(0x1220), region, C.byref(err)
                )
            )
            self.check(err.value, "clCreateSubBuffer")
            out.append(b)
        return out

    def kernels(self, source: str, names: list[str]) -> list[P]:
        text = source.encode()
        ptr, length, err = C.c_char_p(text), C.c_size_t(len(text)), C.c_int()
        prog = P(
            self.cl.clCreateProgramWithSource(
                self.ctx, 1, C.byref(ptr), C.byref(length), C.byref(err)
            )
        )
        self.check(err.value, "clCreateProgramWithSource")
        self.check(
            self.cl.clBuildProgram(prog, 1, C.byref(self.dev), b"", None, None), "clBuildProgram"
        )
        out = []
        for name in names:
            k = P(self.cl.clCreateKernel(prog, name.encode(), C.byref(err)))
            self.check(err.value, "clCreateKernel " + name)
            out.append(k)
        return out

    def set_buffers(self, kernel: P, buffers: list[P]) -> None:
        for i, b in enumerate(buffers):
            self.check(
                self.cl.clSetKernelArg(kernel, i, C.c_size_t(8), C.byref(b)), "clSetKernelArg"
            )

    def time_launches(
        self, launches: list[tuple[P, list[P]]], count: int, per_wait: int, reset_args: bool
    ) -> tuple[float, float]:
        """Per-launch enqueue and wall time (us) of `count` launches cycling through
        `launches`, waiting after every `per_wait`; flushes as the delegate does (after the
        second command, then every 16th)."""
        cl = self.cl
        cl.clFinish(self.q)
        enqueue = 0.0
        t_start = time.perf_counter()
        for start in range(0, count, per_wait):
            t0 = time.perf_counter()
            for i in range(start, min(start + per_wait, count)):
                kernel, buffers = launches[i % len(launches)]
                if reset_args:
                    self.set_buffers(kernel, buffers)
                self.check(
                    cl.clEnqueueNDRangeKernel(
                        self.q, kernel, 1, None, self.gsz, self.lsz, 0, None, None
                    ),
                    "clEnqueueNDRangeKernel",
                )
                if (i - start) == 1 or (i - start) % 16 == 15:
                    cl.clFlush(self.q)
            enqueue += time.perf_counter() - t0
            cl.clFinish(self.q)
        wall = time.perf_counter() - t_start
        return enqueue * 1e6 / count, wall * 1e6 / count

    def time_waits(
        self, launches: list[tuple[P, list[P]]], per_burst: int, bursts: int, wait: str
    ) -> tuple[float, float]:
        """Median host time (us) until the last command of a burst is enqueued, and median
        wall time per burst: `per_burst` kernels and a non-blocking 4-byte read, as an invoke
        ends, then the wait: "finish" (clFinish), "read" (the read blocking instead), "poll"
        (a marker's status read until complete) or "event" (clWaitForEvents on the marker)."""
        cl = self.cl
        out = (C.c_float * 1)()
        ev, status = P(), C.c_int()
        enq, wall = [], []
        cl.clFinish(self.q)
        for _ in range(bursts):
            t0 = time.perf_counter()
            for i in range(per_burst):
                kernel, _ = launches[i % len(launches)]
                cl.clEnqueueNDRangeKernel(
                    self.q, kernel, 1, None, self.gsz, self.lsz, 0, None, None
                )
                if i == 1 or i % 16 == 15:
                    cl.clFlush(self.q)
            src = launches[(per_burst - 1) % len(launches)][1][0]
            blocking = C.c_uint(1 if wait == "read" else 0)
            self.check(
                cl.clEnqueueReadBuffer(
                    self.q, src, blocking, C.c_size_t(0), C.c_size_t(4), out, 0, None, None
                ),
                "clEnqueueReadBuffer",
            )
            if wait in ("poll", "event"):
                self.check(cl.clEnqueueMarkerWithWaitList(self.q, 0, None, C.byref(ev)), "marker")
                cl.clFlush(self.q)
            t1 = time.perf_counter()
            if wait == "finish":
                cl.clFinish(self.q)
            elif wait == "event":
                self.check(cl.clWaitForEvents(1, C.byref(ev)), "clWaitForEvents")
            elif wait == "poll":
                status.value = 1
                while status.value > 0:  # CL_COMPLETE is 0, errors negative
                    cl.clGetEventInfo(ev, C.c_uint(0x11D3), C.c_size_t(4), C.byref(status), None)
            if wait in ("poll", "event"):
                cl.clReleaseEvent(ev)
            t2 = time.perf_counter()
            enq.append((t1 - t0) * 1e6)
            wall.append((t2 - t0) * 1e6)
        return statistics.median(enq), statistics.median(wall)


def _source(functions: int, args: int, ints: int = 0) -> str:
    """`functions` distinct kernels k0.. of `args` buffers and `ints` integers: out = sum of the
    other buffers and the integers."""
    params = ", ".join(
        [f"__global float* a{i}" for i in range(args)] + [f"int n{i}" for i in range(ints)]
    )
    total = " + ".join([f"a{i}[g]" for i in range(1, args)] + [f"n{i}" for i in range(ints)])
    return "\n".join(
        f"__kernel void k{f}({params}) {{ int g = get_global_id(0); a0[g] = {total or 0} + {f}; }}"
        for f in range(functions)
    )


CASES: list[tuple[str, int, int, int, int, str, bool]] = [
    # name, kernel objects, distinct functions, buffer args, integer args, buffers ("shared":
    # the same ones for every kernel object, "each": its own, "sub": its own sub-buffers of one
    # buffer, "one": one buffer of its own passed as every argument), buffers set again before
    # each launch
    ("one kernel, 2 buffers", 1, 1, 2, 0, "shared", False),
    ("4 kernels in turn, 2 buffers", 4, 4, 2, 0, "shared", False),
    ("25 kernels in turn, 2 buffers", 25, 25, 2, 0, "shared", False),
    ("25 kernels in turn, 8 buffers shared", 25, 25, 8, 0, "shared", False),
    ("25 kernels in turn, 8 buffers each", 25, 25, 8, 0, "each", False),
    ("25 kernels in turn, 16 buffers each", 25, 25, 16, 0, "each", False),
    ("25 kernels in turn, 16 sub-buffers of one buffer each", 25, 25, 16, 0, "sub", False),
    ("25 kernels in turn, one buffer each as 16 arguments", 25, 25, 16, 0, "one", False),
    ("25 kernels in turn, 4 buffers each and 12 integers", 25, 25, 4, 12, "each", False),
    ("25 kernels in turn, 8 buffers each and 32 integers", 25, 25, 8, 32, "each", False),
    ("25 objects of one kernel, 8 buffers each", 25, 1, 8, 0, "each", False),
    ("one object, its 8 buffers set before each launch", 25, 1, 8, 0, "each", True),
]


def run(launches: int, rounds: int) -> list[dict[str, Any]]:
    drv = Driver()
    rows = []
    for name, objects, functions, args, ints, distinct, reset in CASES:
        # One kernel object per launch slot, of one program; a single one where it is reset.
        names = [f"k{k % functions}" for k in range(1 if reset else objects)]
        kernels = drv.kernels(_source(functions, args, ints), names)
        shared = [drv.buffer() for _ in range(args)]
        setups = []
        for k in range(objects):
            kernel = kernels[k % len(kernels)]
            if distinct == "each":
                buffers = [drv.buffer() for _ in range(args)]
            elif distinct == "sub":
                buffers = drv.sub_buffers(args)
            elif distinct == "one":
                buffers = [drv.buffer()] * args
            else:
                buffers = shared
            drv.set_buffers(kernel, buffers)
            for i in range(ints):  # set once, as the delegate's plans do
                v = C.c_int(i)
                drv.check(
                    drv.cl.clSetKernelArg(kernel, args + i, C.c_size_t(4), C.byref(v)),
                    "clSetKernelArg",
                )
            setups.append((kernel, buffers))
        for mode, per_wait in (("stream", launches), ("burst of 25", BURST)):
            drv.time_launches(setups, min(launches, 200), per_wait, reset)  # warm-up
            times = [drv.time_launches(setups, launches, per_wait, reset) for _ in range(rounds)]
            enq = [t[0] for t in times]
            rows.append(
                {
                    "case": name,
                    "mode": mode,
                    "enqueue_us_min": min(enq),
                    "enqueue_us_median": statistics.median(enq),
                    "wall_us_per_launch": statistics.median(t[1] for t in times),
                }
            )
            print(
                f"{name:50} {mode:12} enqueue {min(enq):6.2f} / "
                f"{statistics.median(enq):6.2f} us, wall {rows[-1]['wall_us_per_launch']:7.2f}"
            )
    # How an invoke's end waits for the device: the same bursts, four ways.
    kernels = drv.kernels(_source(BURST, 2), [f"k{k}" for k in range(BURST)])
    buffers = [drv.buffer(), drv.buffer()]
    setups = []
    for kernel in kernels:
        drv.set_buffers(kernel, buffers)
        setups.append((kernel, buffers))
    for per_burst in (1, 4, BURST):
        for wait in WAITS:
            drv.time_waits(setups, per_burst, 50, wait)  # warm-up
            times = [
                drv.time_waits(setups, per_burst, max(50, launches // per_burst), wait)
                for _ in range(rounds)
            ]
            rows.append(
                {
                    "case": f"{per_burst} kernels and a 4-byte read, then a wait",
                    "mode": WAITS[wait],
                    "enqueue_us_min": min(t[0] for t in times) / per_burst,
                    "enqueue_us_median": statistics.median(t[0] for t in times) / per_burst,
                    "wall_us_per_launch": statistics.median(t[1] for t in times) / per_burst,
                }
            )
            print(
                f"{rows[-1]['case']:50} {WAITS[wait]:30} wall "
                f"{rows[-1]['wall_us_per_launch'] * per_burst:7.2f} us per burst"
            )
    return rows


def probe_main(
    argv: list[str] | None,
    doc: str,
    stem: str,
    run_probe: Callable[[int, int], list[dict[str, Any]]],
    columns: list[tuple[str, str]],
    meta: dict[str, Any],
) -> int:
    """The driver probes' command line (this one, context_population.py, launch_shape.py):
    --launches, --rounds, --tag and --out; writes STEM[-TAG]-<device>.json and .md."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=2000, help="per case")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tag", default="", help=f"file name part: {stem}-TAG-<device>")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    if a.launches < BURST or a.rounds < 1:
        ap.error(f"--launches at least {BURST}, --rounds at least 1")
    rows = run_probe(a.launches, a.rounds)
    info = {**device_info(), "launches": a.launches, "rounds": a.rounds, **meta}
    base = write_results(stem + (f"-{a.tag}" if a.tag else ""), info, rows, columns, a.out)
    print(f"wrote {base}.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    columns = [
        ("case", "case"),
        ("mode", "mode"),
        ("enqueue_us_min", "enqueue us min"),
        ("enqueue_us_median", "enqueue us median"),
        ("wall_us_per_launch", "wall us per launch"),
    ]
    return probe_main(
        argv, __doc__, "enqueue-probe", run, columns, {"items": ITEMS, "group": GROUP}
    )


if __name__ == "__main__":
    sys.exit(main())
