"""Where a cold program build goes on an OpenCL driver, stage by stage and thread by thread
(through ctypes: no delegate in the timed processes), over the programs models really build.

    python bench/nv_build_probe.py [--models mobilenet_v2,inception_v3,pynet] [--threads 4,16]
        [--tag NAME] [--out bench/results]

The programs are those the delegate builds for the models (`partitioning="all"`, read from
its CLGPU_LOG=debug lines). Each measurement then runs in a fresh process with the drivers'
caches off (CUDA_CACHE_DISABLE=1, POCL_KERNEL_CACHE=0) and builds every program once:

- build: clBuildProgram from source on 1 thread, then on N threads sharing one context
  (build_shared) or each with its own context (build_contexts): whether the driver compiles
  programs concurrently;
- front_end: clCompileProgram alone (OpenCL C to the driver's intermediate form);
- load_binary: clCreateProgramWithBinary + clBuildProgram of the binaries the 1-thread build
  handed out (NVIDIA: PTX, which ptxas compiles again), on 1 and N threads;
- trivial: as many programs of one tiny kernel each, built one after another: what a build
  costs whatever the kernel (the driver's fixed part);
- link_one: every program compiled apart (clCompileProgram, its kernels renamed by a -D so
  that two variants of one file can meet) and all linked into one (clLinkProgram): the code
  generation a model needs, paid once instead of once per program;
- NVIDIA only: link_cubin, libcuda's cuLinkCreate/cuLinkComplete of that PTX into a cubin, on
  1 and N threads, and load_cubin, the cubins through clCreateProgramWithBinary.

"wall ms" is the time to build all programs; "summed ms" adds each program's own time over
the threads (above wall when they overlap). Writes nv-build-probe[-TAG]-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "kernels"
PTR = C.c_void_p
COLD = {"CUDA_CACHE_DISABLE": "1", "POCL_KERNEL_CACHE": "0"}


def kernel_source(name: str) -> str:
    """kernels/common.cl and kernels/<name>.cl with its includes, as the delegate builds it."""

    def expanded(stem: str) -> str:
        lines = []
        for line in (KERNELS / f"{stem}.cl").read_text().split("\n"):
            m = re.match(r'#include "(\w+)\.cl"$', line)
            lines.append(expanded(m.group(1)) if m else line)
        return "\n".join(lines)

    return (KERNELS / "common.cl").read_text() + "\n#line 1\n" + expanded(name) + "\n"


def kernel_names(source: str) -> list[str]:
    """The __kernel functions a source defines."""
    return re.findall(r"__kernel\b[^;{]*?\bvoid\s+(\w+)\s*\(", source)


def trivial_source(i: int) -> str:
    return f"__kernel void k{i}(__global float* a) {{ a[get_global_id(0)] = {i}.0f; }}\n"


class OpenCl:
    """The first GPU of any platform (else the first device), one context per context()."""

    def __init__(self) -> None:
        self.cl = C.CDLL("libOpenCL.so.1")
        for fn in (
            "clCreateContext",
            "clCreateProgramWithSource",
            "clCreateProgramWithBinary",
            "clLinkProgram",
            "clCreateKernel",
        ):
            getattr(self.cl, fn).restype = PTR
        plats = (PTR * 8)()
        n = C.c_uint()
        self.cl.clGetPlatformIDs(8, plats, C.byref(n))
        self.device = None
        for kind in (4, 0xFFFFFFFF):  # CL_DEVICE_TYPE_GPU, then any
            for i in range(n.value):
                devs = (PTR * 1)()
                m = C.c_uint()
                got = self.cl.clGetDeviceIDs(PTR(plats[i]), C.c_uint64(kind), 1, devs, C.byref(m))
                if got == 0:
                    self.device = PTR(devs[0])
                    break
            if self.device:
                break
        if not self.device:
            raise SystemExit("no OpenCL device")

    def context(self) -> PTR:
        err = C.c_int()
        ctx = self.cl.clCreateContext(None, 1, C.byref(self.device), None, None, C.byref(err))
        if err.value:
            raise RuntimeError(f"clCreateContext: {err.value}")
        return PTR(ctx)

    def _program(self, ctx: PTR, source: str) -> PTR:
        text = source.encode()
        s, n, err = C.c_char_p(text), C.c_size_t(len(text)), C.c_int()
        return PTR(self.cl.clCreateProgramWithSource(ctx, 1, C.byref(s), C.byref(n), C.byref(err)))

    def build(self, ctx: PTR, source: str, options: str) -> PTR:
        prog = self._program(ctx, source)
        opts = ("-cl-std=CL1.2 " + options).encode()
        if self.cl.clBuildProgram(prog, 1, C.byref(self.device), opts, None, None):
            raise RuntimeError("clBuildProgram failed")
        return prog

    def compile(self, ctx: PTR, source: str, options: str) -> PTR:
        prog = self._program(ctx, source)
        opts = ("-cl-std=CL1.2 " + options).encode()
        if self.cl.clCompileProgram(prog, 1, C.byref(self.device), opts, 0, None, None, None, None):
            raise RuntimeError("clCompileProgram failed")
        return prog

    def link(self, ctx: PTR, objects: list[PTR]) -> PTR:
        arr = (PTR * len(objects))(*objects)
        err = C.c_int()
        prog = PTR(
            self.cl.clLinkProgram(
                ctx, 1, C.byref(self.device), b"", len(objects), arr, None, None, C.byref(err)
            )
        )
        if err.value:
            raise RuntimeError(f"clLinkProgram: {err.value}")
        return prog

    def has_kernel(self, prog: PTR, name: str) -> bool:
        err = C.c_int()
        k = self.cl.clCreateKernel(prog, name.encode(), C.byref(err))
        if err.value:
            return False
        self.cl.clReleaseKernel(PTR(k))
        return True

    def binary(self, prog: PTR) -> bytes:
        n = C.c_size_t()
        self.cl.clGetProgramInfo(prog, 0x1165, C.sizeof(n), C.byref(n), None)  # BINARY_SIZES
        buf = C.create_string_buffer(n.value)
        ptr = C.c_char_p(C.addressof(buf))
        self.cl.clGetProgramInfo(prog, 0x1166, C.sizeof(ptr), C.byref(ptr), None)  # BINARIES
        return buf.raw

    def load(self, ctx: PTR, data: bytes, options: str) -> PTR:
        n, b, status, err = C.c_size_t(len(data)), C.c_char_p(data), C.c_int(), C.c_int()
        prog = PTR(
            self.cl.clCreateProgramWithBinary(
                ctx, 1, C.byref(self.device), C.byref(n), C.byref(b), C.byref(status), C.byref(err)
            )
        )
        opts = ("-cl-std=CL1.2 " + options).encode()
        if err.value or status.value or self.cl.clBuildProgram(
            prog, 1, C.byref(self.device), opts, None, None
        ):
            raise RuntimeError("the driver refused the binary")
        return prog


class CudaLinker:
    """PTX to cubin through libcuda (in the device's primary context)."""

    def __init__(self) -> None:
        self.cu = C.CDLL("libcuda.so.1")
        dev = C.c_int()
        self.ctx = PTR()
        if (
            self.cu.cuInit(0)
            or self.cu.cuDeviceGet(C.byref(dev), 0)
            or self.cu.cuDevicePrimaryCtxRetain(C.byref(self.ctx), dev)
        ):
            raise RuntimeError("no CUDA context")

    def link(self, ptx: bytes) -> bytes:
        self.cu.cuCtxSetCurrent(self.ctx)
        state, out, size = PTR(), PTR(), C.c_size_t()
        text = ptx + b"\0"
        if (
            self.cu.cuLinkCreate_v2(0, None, None, C.byref(state))
            or self.cu.cuLinkAddData_v2(
                state, 1, C.c_char_p(text), C.c_size_t(len(text)), b"p.ptx", 0, None, None
            )
            or self.cu.cuLinkComplete(state, C.byref(out), C.byref(size))
        ):
            raise RuntimeError("cuLink failed")
        cubin = C.string_at(out, size.value)
        self.cu.cuLinkDestroy(state)
        return cubin


def run_threads(n: int, items: list[Any], fn: Callable[[Any], None]) -> tuple[float, float]:
    """fn over items on n threads (ctypes lets go of the GIL in each call): wall and summed ms."""
    todo = list(items)
    lock = threading.Lock()
    own: list[float] = []
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                item = todo.pop(0)
            t = time.perf_counter()
            try:
                fn(item)
            except BaseException as e:  # reported after the join
                errors.append(e)
                return
            own.append((time.perf_counter() - t) * 1e3)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return (time.perf_counter() - t0) * 1e3, sum(own)


def measure(stage: str, threads: int, programs: list[list[str]], work: Path) -> dict[str, Any]:
    """One stage in this (fresh) process."""
    t0 = time.perf_counter()
    ocl = OpenCl()
    shared = ocl.context()
    setup_ms = (time.perf_counter() - t0) * 1e3
    items = list(enumerate(programs))
    local = threading.local()

    def own_context() -> PTR:
        if not hasattr(local, "ctx"):
            local.ctx = ocl.context()
        return local.ctx  # type: ignore[no-any-return]

    built: list[tuple[int, PTR]] = []

    def build(item: tuple[int, list[str]]) -> None:
        i, (name, opts) = item
        ctx = own_context() if stage == "build_contexts" else shared
        built.append((i, ocl.build(ctx, kernel_source(name), opts)))

    each: list[float] = []

    def build_each(item: tuple[int, list[str]]) -> None:
        t = time.perf_counter()
        build(item)
        each.append(round((time.perf_counter() - t) * 1e3, 1))

    def trivial(item: tuple[int, list[str]]) -> None:
        ocl.build(shared, trivial_source(item[0]), "")

    def link_one(_: Any) -> None:
        objects, names = [], []
        for i, (name, opts) in enumerate(programs):
            source = kernel_source(name)
            renames = [(k, f"{k}__u{i}") for k in kernel_names(source)]
            names.append([new for _, new in renames])
            defines = " ".join(f"-D{k}={new}" for k, new in renames)
            objects.append(ocl.compile(shared, source, f"{opts} {defines}"))
        linked = ocl.link(shared, objects)
        # Every program's kernels are there (a kernel inside an #if its defines leave out is not).
        for unit in names:
            if not any(ocl.has_kernel(linked, n) for n in unit):
                raise RuntimeError(f"no kernel of {unit} in the linked program")

    linker = CudaLinker() if stage == "link_cubin" else None
    fns: dict[str, Callable[[Any], None]] = {
        "build": build_each,
        "build_shared": build,
        "trivial": trivial,
        "build_contexts": build,
        "front_end": lambda it: ocl.compile(shared, kernel_source(it[1][0]), it[1][1]),
        "load_binary": lambda it: ocl.load(
            shared, (work / f"{it[0]}.bin").read_bytes(), it[1][1]
        ),
        "link_cubin": lambda it: (work / f"{it[0]}.cubin").write_bytes(
            linker.link((work / f"{it[0]}.bin").read_bytes())  # type: ignore[union-attr]
        ),
        "load_cubin": lambda it: ocl.load(
            shared, (work / f"{it[0]}.cubin").read_bytes(), it[1][1]
        ),
    }
    if stage == "link_one":
        wall, summed = run_threads(1, [None], link_one)
        return {"setup_ms": setup_ms, "wall_ms": wall, "summed_ms": summed}
    wall, summed = run_threads(threads, items, fns[stage])
    if stage == "build":  # the binaries the later stages load, fetched after the timing
        for i, prog in built:
            (work / f"{i}.bin").write_bytes(ocl.binary(prog))
    out = {"setup_ms": setup_ms, "wall_ms": wall, "summed_ms": summed}
    if stage == "build":
        out["each_ms"] = each
    return out


def collect(models: list[str]) -> list[list[str]]:
    """The distinct (kernel file, options) the delegate builds for the models."""
    from clgpu_delegate.modelgen import zoo

    seen: list[list[str]] = []
    for m in models:
        path = m if m.endswith(".tflite") else str(zoo.path(m))
        env = {**os.environ, **COLD, "CLGPU_LOG": "debug", "CLGPU_BUILD_THREADS": "1"}
        cmd = [sys.executable, str(HERE / "bench_init.py"), "--child", path]
        cmd += ["--child-options", json.dumps({"partitioning": "all"})]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd="/")
        for line in p.stderr.splitlines():
            got = re.search(r"program (\w+) \[(.*)\] built in", line)
            if got and got.group(1) != "device_probe" and list(got.groups()) not in seen:
                seen.append(list(got.groups()))
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mobilenet_v2,inception_v3,pynet")
    ap.add_argument("--threads", default="4,16")
    ap.add_argument("--stages", default="", help="only these stages (comma-separated)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--programs", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage:
        programs = json.loads(Path(args.programs).read_text())
        r = measure(args.stage, args.n, programs, Path(args.work))
        print("RESULT " + json.dumps(r), flush=True)
        return 0
    programs = collect(args.models.split(","))
    if not programs:
        raise SystemExit("the delegate built no program (is a device there?)")
    sys.path.insert(0, str(HERE))
    from _common import device_info, write_results

    info = device_info()
    nvidia = "nvidia" in str(info.get("device", "")).lower()
    many = [int(t) for t in args.threads.split(",") if t]
    plan = [("build", 1)] + [(s, n) for s in ("build_shared", "build_contexts") for n in many]
    plan += [("trivial", 1), ("link_one", 1)]
    plan += [("front_end", 1), ("load_binary", 1)] + [("load_binary", n) for n in many]
    if nvidia:
        plan += [("link_cubin", 1)] + [("link_cubin", n) for n in many] + [("load_cubin", 1)]
    if args.stages:
        wanted = args.stages.split(",")
        plan = [(s, n) for s, n in plan if s in wanted or (s == "build" and n == 1)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nv-build-") as tmp:
        listing = Path(tmp) / "programs.json"
        listing.write_text(json.dumps(programs))
        for stage, n in plan:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", stage, "--n", str(n)]
            cmd += ["--programs", str(listing), "--work", tmp]
            p = subprocess.run(cmd, env={**os.environ, **COLD}, capture_output=True, text=True)
            got = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            r = json.loads(got[0][7:]) if got else {"error": (p.stderr.strip() or "?")[-200:]}
            rows.append({"stage": stage, "threads": n, "programs": len(programs), **r})
            print(rows[-1], flush=True)
    meta = {**info, "models": args.models, "host_cpus": os.cpu_count(), "caches": "off"}
    cols = [
        ("stage", "stage"),
        ("threads", "threads"),
        ("programs", "programs"),
        ("wall_ms", "wall ms"),
        ("summed_ms", "summed ms"),
        ("setup_ms", "driver setup ms"),
        ("error", "error"),
    ]
    stem = "nv-build-probe" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
