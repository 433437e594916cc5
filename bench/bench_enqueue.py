"""The host's cost of one kernel enqueue, by how the kernel's buffers are passed (through ctypes:
no delegate, one tiny kernel enqueued many times on one in-order queue).

    python bench/bench_enqueue.py [--enqueues 1000] [--rounds 12] [--tag NAME]
        [--out bench/results]

A batch-1 model of small layers is bound by the host when its kernels run faster than the host
enqueues them (`DelegateStats.host_enqueue_us` against `host_wait_us`). Each turn enqueues the
same do-almost-nothing kernel (one work-group of 64) --enqueues times, flushing every 16 as the
delegate does unless the case says otherwise; the cases take turns in a shuffled order,
--rounds times (the host's speed drifts on a shared machine), and each row reports the median
and least host time per enqueue over its turns and the median time per kernel up to the end of
the device's work. Cases:

- one_arg: a kernel of one buffer argument;
- buffers: a kernel of 8 buffer and 12 int arguments (a GEMM's), N distinct plain buffers
  (clCreateBuffer) among them, N = 1, 4, 8;
- svm_views: N buffers wrapping coarse-grained SVM memory (CL_MEM_USE_HOST_PTR on clSVMAlloc
  memory: the delegate's activations on NVIDIA);
- svm_pointers: N SVM pointers (clSetKernelArgSVMPointer), no buffer objects;
- no_local: 4 buffers, the work-group size left to the driver;
- alternate: 4 buffers, four kernels in turn (0, 1, 8 and 32 KiB of local memory each), as the
  layers of a model follow each other; alternate_no_local: four kernels without local memory;
  alternate_same_local: four kernels of 8 KiB each (what alternating costs: the switch or the
  local memory);
- flush_each, flush_4, flush_64, no_flush: 4 buffers, a flush after every enqueue, every 4th,
  every 64th, none (the final clFinish submits).

Writes enqueue[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import ctypes as C
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PTR = C.c_void_p

SOURCE = """
__kernel void touch1(__global float* a) {
  if (get_global_id(0) == 0) a[0] += 1.0f;
}
#define TOUCH_LOCAL(name, n)                                                                   \\
  __kernel void name(__global float* a, __global float* b, __global float* c, __global float* d, \\
                     __global float* e, __global float* f, __global float* g, __global float* h, \\
                     int i0, int i1, int i2, int i3, int i4, int i5, int i6, int i7, int i8,     \\
                     int i9, int i10, int i11) {                                                 \\
    __local float t[n];                                                                          \\
    t[get_local_id(0) % n] = (float)i0;                                                          \\
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \\
    if (get_global_id(0) == 0) a[0] += t[i11 % n];                                               \\
  }
TOUCH_LOCAL(touch_l1, 256)
TOUCH_LOCAL(touch_l2, 2048)
TOUCH_LOCAL(touch_s1, 2048)
TOUCH_LOCAL(touch_s2, 2048)
TOUCH_LOCAL(touch_s3, 2048)
#define TOUCH_PLAIN(name, k)                                                                   \\
  __kernel void name(__global float* a, __global float* b, __global float* c, __global float* d, \\
                     __global float* e, __global float* f, __global float* g, __global float* h, \\
                     int i0, int i1, int i2, int i3, int i4, int i5, int i6, int i7, int i8,     \\
                     int i9, int i10, int i11) {                                                 \\
    if (get_global_id(0) == 0) a[0] += (float)(i0 * k + i11);                                    \\
  }
TOUCH_PLAIN(touch_p1, 2)
TOUCH_PLAIN(touch_p2, 3)
TOUCH_PLAIN(touch_p3, 5)
TOUCH_LOCAL(touch_l3, 8192)
__kernel void touch(__global float* a, __global float* b, __global float* c, __global float* d,
                    __global float* e, __global float* f, __global float* g, __global float* h,
                    int i0, int i1, int i2, int i3, int i4, int i5, int i6, int i7, int i8,
                    int i9, int i10, int i11) {
  if (get_global_id(0) == 0) a[0] += (float)(i0 + i11);
}
"""


class Cl:
    def __init__(self) -> None:
        self.cl = C.CDLL(os.environ.get("CLGPU_OPENCL_LIBRARY", "libOpenCL.so.1"))
        for fn in (
            "clCreateContext",
            "clCreateProgramWithSource",
            "clCreateKernel",
            "clCreateBuffer",
            "clCreateCommandQueue",
            "clSVMAlloc",
        ):
            getattr(self.cl, fn).restype = PTR
        plats = (PTR * 8)()
        n = C.c_uint()
        self.cl.clGetPlatformIDs(8, plats, C.byref(n))
        self.device = None
        for kind in (4, 0xFFFFFFFF):  # a GPU first
            for i in range(n.value):
                dev = (PTR * 1)()
                if self.cl.clGetDeviceIDs(PTR(plats[i]), C.c_uint64(kind), 1, dev, None) == 0:
                    self.device = PTR(dev[0])
                    break
            if self.device:
                break
        if not self.device:
            raise SystemExit("no OpenCL device")
        err = C.c_int()
        self.ctx = PTR(
            self.cl.clCreateContext(None, 1, C.byref(self.device), None, None, C.byref(err))
        )
        self.queue = PTR(
            self.cl.clCreateCommandQueue(self.ctx, self.device, C.c_uint64(0), C.byref(err))
        )
        text = SOURCE.encode()
        s, ln = C.c_char_p(text), C.c_size_t(len(text))
        prog = PTR(
            self.cl.clCreateProgramWithSource(self.ctx, 1, C.byref(s), C.byref(ln), C.byref(err))
        )
        if self.cl.clBuildProgram(prog, 1, C.byref(self.device), b"", None, None):
            raise SystemExit("the probe kernel did not build")
        self.kernel = PTR(self.cl.clCreateKernel(prog, b"touch", C.byref(err)))
        self.kernel1 = PTR(self.cl.clCreateKernel(prog, b"touch1", C.byref(err)))
        self.others = [
            PTR(self.cl.clCreateKernel(prog, name, C.byref(err)))
            for name in (b"touch_l1", b"touch_l2", b"touch_l3")
        ]
        # Four kernels in turn that all use no local memory, or all the same 8 KiB: whether
        # what alternating costs comes from switching kernels or from their local memory.
        self.plain = [
            PTR(self.cl.clCreateKernel(prog, n, C.byref(err)))
            for n in (b"touch_p1", b"touch_p2", b"touch_p3")
        ]
        self.same_local = [
            PTR(self.cl.clCreateKernel(prog, n, C.byref(err)))
            for n in (b"touch_l2", b"touch_s1", b"touch_s2", b"touch_s3")
        ]

    def buffer(self, host: PTR | None = None) -> PTR:
        err = C.c_int()
        flags = 1 | (8 if host else 0)  # CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR
        return PTR(
            self.cl.clCreateBuffer(
                self.ctx, C.c_uint64(flags), C.c_size_t(4096), host, C.byref(err)
            )
        )

    def svm(self) -> PTR | None:
        p = self.cl.clSVMAlloc(self.ctx, C.c_uint64(1), C.c_size_t(4096), C.c_uint(0))
        return PTR(p) if p else None

    def info(self) -> dict[str, str]:
        def text(param: int) -> str:
            buf = C.create_string_buffer(256)
            self.cl.clGetDeviceInfo(self.device, C.c_uint(param), 256, buf, None)
            return buf.value.decode(errors="replace").strip()

        return {"device": text(0x102B), "driver": text(0x102D)}


class Case:
    """One way of enqueueing: its kernel with its arguments set, its local size, its flushes."""

    def __init__(self, cl: Cl, name: str, nbuf: int, local: bool, every: int) -> None:
        self.cl, self.name, self.nbuf, self.every = cl, name, nbuf, every
        self.kernel = PTR(cl.kernel1.value) if name == "one_arg" else PTR(cl.kernel.value)
        # alternate: four kernels in turn (of 0, 1, 8 and 32 KiB of local memory), as a model's
        # layers are.
        self.kernels = [self.kernel] + (cl.others if name == "alternate" else [])
        if name == "alternate_no_local":
            self.kernels = [self.kernel, *cl.plain]
        elif name == "alternate_same_local":
            self.kernels = list(cl.same_local)
        self.glob = (C.c_size_t * 1)(64)
        self.local = (C.c_size_t * 1)(64) if local else None
        self.error = ""
        mems: list[Any] = []
        for _ in range(nbuf):
            if name.startswith("svm"):
                mem = cl.svm()
                if mem is None:
                    self.error = "no SVM"
                    return
                mems.append(cl.buffer(mem) if name == "svm_views" else mem)
            else:
                mems.append(cl.buffer())
        self.mems = mems

    def bind(self) -> None:
        """The arguments (set again before each turn: the cases share kernel objects)."""
        for k in self.kernels:
            self._bind(k)

    def _bind(self, k: PTR) -> None:
        cl = self.cl.cl
        n_args = 1 if self.name == "one_arg" else 8
        for i in range(n_args):
            a = self.mems[i % self.nbuf]  # nbuf distinct memory objects among the arguments
            if self.name == "svm_pointers":
                cl.clSetKernelArgSVMPointer(k, C.c_uint(i), a)
            else:
                cl.clSetKernelArg(k, C.c_uint(i), C.sizeof(PTR), C.byref(a))
        for i in range(0 if self.name == "one_arg" else 12):
            v = C.c_int(i)
            cl.clSetKernelArg(k, C.c_uint(8 + i), C.sizeof(v), C.byref(v))

    def turn(self, enqueues: int) -> tuple[float, float]:
        """Host us per enqueue, and us per kernel up to the end of the device's work."""
        cl, q, ks = self.cl.cl, self.cl.queue, self.kernels
        self.bind()
        cl.clFinish(q)
        t0 = time.perf_counter()
        for j in range(enqueues):
            k = ks[j % len(ks)]
            cl.clEnqueueNDRangeKernel(q, k, 1, None, self.glob, self.local, 0, None, None)
            if self.every and (j == 1 or j % self.every == 0):
                cl.clFlush(q)
        t1 = time.perf_counter()
        cl.clFinish(q)
        t2 = time.perf_counter()
        return (t1 - t0) * 1e6 / enqueues, (t2 - t0) * 1e6 / enqueues


# name, distinct buffers, local size given, flush period (0: only the final clFinish)
CASES = [
    ("one_arg", 1, True, 16),
    ("buffers", 1, True, 16),
    ("buffers", 4, True, 16),
    ("buffers", 8, True, 16),
    ("svm_views", 4, True, 16),
    ("svm_pointers", 4, True, 16),
    ("no_local", 4, False, 16),
    ("alternate", 4, True, 16),
    ("alternate_no_local", 4, True, 16),
    ("alternate_same_local", 4, True, 16),
    ("flush_each", 4, True, 1),
    ("flush_4", 4, True, 4),
    ("flush_64", 4, True, 64),
    ("no_flush", 4, True, 0),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--enqueues", type=int, default=1000, help="per turn")
    ap.add_argument("--rounds", type=int, default=12, help="turns per case, shuffled")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    cl = Cl()
    cases = [Case(cl, *c) for c in CASES]
    times: dict[int, list[tuple[float, float]]] = {i: [] for i in range(len(cases))}
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = list(range(len(cases)))
        rng.shuffle(order)
        for i in order:
            if not cases[i].error:
                times[i].append(cases[i].turn(args.enqueues))
    rows = []
    for i, c in enumerate(cases):
        row: dict[str, Any] = {
            "case": c.name,
            "buffers": c.nbuf,
            "local": c.local is not None,
            "flush_every": c.every,
        }
        if c.error:
            row["error"] = c.error
        else:
            enq = sorted(t[0] for t in times[i])
            row["enqueue_us"] = round(statistics.median(enq), 3)
            row["enqueue_min_us"] = round(enq[0], 3)
            row["per_kernel_us"] = round(statistics.median(t[1] for t in times[i]), 3)
        rows.append(row)
        print(row, flush=True)
    sys.path.insert(0, str(HERE))
    from _common import device_info, write_results

    meta = {
        **device_info(),
        "enqueues": args.enqueues,
        "rounds": args.rounds,
        "host_cpus": os.cpu_count(),
        "kernel": os.uname().release,
    }
    cols = [
        ("case", "case"),
        ("buffers", "buffers"),
        ("local", "local size given"),
        ("flush_every", "flush every"),
        ("enqueue_us", "host us per enqueue (median)"),
        ("enqueue_min_us", "(min)"),
        ("per_kernel_us", "us per kernel, enqueue to finish"),
        ("error", "error"),
    ]
    stem = "enqueue" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
