"""Model initialization, cold to warm, each start in a fresh process (`clgpu-delegate bench`
times a warm start only):

- cold: the driver's own program cache off (CUDA_CACHE_DISABLE=1 on NVIDIA, POCL_KERNEL_CACHE=0
  on PoCL) and an empty serialization_dir, as on a new machine; the start fills that directory.
- driver_warm: no serialization_dir, the driver's cache (in a fresh folder of its own) filled by
  one start before the timed one.
- serialization_warm: the driver's cache off, the serialization_dir the cold start filled.
- cold_serial (not by default): cold with CLGPU_BUILD_THREADS=1, every program built on one
  thread, as before parallel builds (checks that the driver's compiler is reentrant: the outputs'
  checksum must match cold's).
- cubin_warm (not by default): serialization_warm from binaries stored as NVIDIA machine code
  (CLGPU_NV_CUBIN=1) instead of PTX, which the driver compiles again at each load.

    python bench/bench_init.py [--set zoo|real|all] [--models a,b] [--dir DIR ...]
        [--modes cold,driver_warm,serialization_warm] [--repeats N] [--invoke-runs N]
        [--partitioning all|cost|default] [--precision fp32] [--cpu-warmup [on|off]] [--tag NAME]
        [--out bench/results]

Init is load() + interpreter creation + allocate_tensors(), where the delegate builds its
programs; "beyond driver" subtracts the OpenCL driver's device listing and context creation.
The first invoke is timed apart (PoCL compiles each kernel for its work-group size there). With
--invoke-runs N the cold, driver-warm and serialization-warm starts also time N steady-state
invokes (median). Each start invokes ten times back to back and reports when the first and the
tenth result came, from load()'s call, less the driver's setup. With cpu_warmup (the default;
--cpu-warmup off for a start that builds every program in allocate_tensors()) init returns before
the programs are built and the first invokes run on TFLite's CPU kernels: the start then invokes
back to back, as an application would, until one ran on the device, and reports when that one
ended ("on the device after ms", from load()) and how many ran on the CPU before; the checksum
and steady invokes are the device's. Writes
bench/results/init[-TAG]-<device>.json and .md (device, driver, date, command, load average).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ["cold", "driver_warm", "serialization_warm", "cold_serial", "cubin_warm"]
REAL_DIRS = [
    Path("~/.cache/clgpu_delegate/public-models").expanduser(),
    Path("~/.cache/clgpu_delegate/keras-models").expanduser(),
]
ZOO = [
    "lenet5",
    "mobilenet_v1",
    "mobilenet_v2",
    "inception_v1",
    "inception_v3",
    "resnet50",
    "alexnet",
    "pynet",
]


def child(model: str, options: dict[str, Any], invoke_runs: int) -> dict[str, Any]:
    """One start in this (fresh) process."""
    import numpy as np

    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    c0 = time.process_time()
    t0 = time.perf_counter()
    d = clgpu_delegate.load(**options)
    t1 = time.perf_counter()
    it = make_interpreter(model, [d])
    it.allocate_tensors()
    t2 = time.perf_counter()
    c2 = time.process_time()
    rng = np.random.default_rng(0)
    for det in it.get_input_details():
        it.set_tensor(det["index"], rng.standard_normal(det["shape"]).astype(det["dtype"]))
    t3 = time.perf_counter()
    it.invoke()
    t4 = time.perf_counter()
    for _ in range(9):  # back to back, as an application would
        it.invoke()
    t5 = time.perf_counter()
    ready_ms = None
    if d.stats().warmups:  # cpu_warmup: invoke until one ran on the device
        while d.stats().invokes == 0 and time.perf_counter() - t0 < 600:
            it.invoke()
        ready_ms = (time.perf_counter() - t0) * 1e3
    outs = [it.get_tensor(det["index"]) for det in it.get_output_details()]
    runs = []
    for _ in range(invoke_runs):
        t = time.perf_counter()
        it.invoke()
        runs.append((time.perf_counter() - t) * 1e3)
    s = d.stats()
    driver_ms = s.driver_setup_us / 1e3
    return {
        "init_ms": (t2 - t0) * 1e3,
        # CPU time of all the process's threads: the compile work, whatever the host's load.
        "init_cpu_ms": (c2 - c0) * 1e3,
        "load_ms": (t1 - t0) * 1e3,
        "load_beyond_driver_ms": (t1 - t0) * 1e3 - driver_ms,
        "driver_setup_ms": driver_ms,
        "beyond_driver_ms": (t2 - t0) * 1e3 - driver_ms,
        "first_invoke_ms": (t4 - t3) * 1e3,
        # From load()'s call to the first result, and to the tenth, less the driver's setup.
        "first_result_ms": (t4 - t0) * 1e3 - driver_ms,
        "tenth_result_ms": (t5 - t0) * 1e3 - driver_ms,
        "device_ready_ms": ready_ms,
        "cpu_invokes": getattr(s, "cpu_invokes", None),
        "invoke_ms": statistics.median(runs) if runs else None,
        "programs_built": s.programs_built,
        # None from builds older than these counters (before/after comparisons).
        "program_binary_loads": getattr(s, "program_binary_loads", None),
        "program_build_ms": getattr(s, "program_build_us", 0) / 1e3 or None,
        "program_cubins_stored": getattr(s, "program_cubins_stored", None),
        "program_cache_hits": s.program_cache_hits,
        "delegated_nodes": len(d.delegated_nodes()),
        "partitions": len(d.partitions()),
        # Equal across the starts of one model: the same programs compute the same outputs.
        "output_sum": float(sum(np.abs(o.astype(np.float64)).sum() for o in outs)),
    }


def start(
    model: str, options: dict[str, Any], env: dict[str, str], invoke_runs: int = 0
) -> dict[str, Any]:
    """child() in a fresh process with `env` added to this one's."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        model,
        "--child-options",
        json.dumps(options),
        "--invoke-runs",
        str(invoke_runs),
    ]
    p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            out: dict[str, Any] = json.loads(line[7:])
            return out
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {p.returncode}: {' | '.join(tail)}"}


def measure(
    model: str, modes: list[str], base: dict[str, Any], invoke_runs: int, work: Path
) -> dict[str, dict[str, Any]]:
    """Each mode's start for one model (cold first: it fills the serialization_dir)."""
    off = {"CUDA_CACHE_DISABLE": "1", "POCL_KERNEL_CACHE": "0"}
    ser = tempfile.mkdtemp(prefix="ser-", dir=work)
    out: dict[str, dict[str, Any]] = {}
    if "cold_serial" in modes:
        fresh = tempfile.mkdtemp(prefix="ser-", dir=work)
        serial = {**off, "CLGPU_BUILD_THREADS": "1"}
        out["cold_serial"] = start(model, {**base, "serialization_dir": fresh}, serial)
    if "cold" in modes or "serialization_warm" in modes:
        out["cold"] = start(model, {**base, "serialization_dir": ser}, off, invoke_runs)
    if "driver_warm" in modes:
        cache = tempfile.mkdtemp(prefix="drv-", dir=work)
        # The drivers' caches in a folder of their own: filled by one start, then timed.
        on = {
            "CUDA_CACHE_PATH": cache,
            "CUDA_CACHE_MAXSIZE": str(4 << 30),
            "POCL_CACHE_DIR": cache,
            "POCL_KERNEL_CACHE": "1",
            "CUDA_CACHE_DISABLE": "0",
        }
        start(model, base, on)
        out["driver_warm"] = start(model, base, on, invoke_runs)
    if "serialization_warm" in modes:
        # Its steady invoke next to cold's: programs loaded from stored machine code run as the
        # ones built from source.
        out["serialization_warm"] = start(
            model, {**base, "serialization_dir": ser}, off, invoke_runs
        )
    if "cubin_warm" in modes:
        # As serialization_warm, from a directory whose binaries were stored as NVIDIA machine
        # code (CLGPU_NV_CUBIN=1, cl/nv_cubin.h) instead of the PTX the driver compiles again.
        cubin_dir = tempfile.mkdtemp(prefix="ser-", dir=work)
        cubin = {**off, "CLGPU_NV_CUBIN": "1"}
        start(model, {**base, "serialization_dir": cubin_dir}, cubin)
        warm_options = {**base, "serialization_dir": cubin_dir}
        out["cubin_warm"] = start(model, warm_options, cubin, invoke_runs)
    if "cold" not in modes:
        out.pop("cold", None)
    return out


def models_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(name, path) of each model to measure."""
    out: list[tuple[str, str]] = []
    if args.set in ("zoo", "all"):
        from clgpu_delegate.modelgen import zoo

        names = args.models.split(",") if args.models and args.set == "zoo" else ZOO
        out += [(n, str(zoo.path(n))) for n in names]
    if args.set in ("real", "all"):
        dirs = [Path(d).expanduser() for d in args.dir] if args.dir else REAL_DIRS
        wanted = set(args.models.split(",")) if args.models and args.set == "real" else None
        for d in dirs:
            for p in sorted(d.glob("*.tflite")):
                if wanted is None or p.stem in wanted:
                    out.append((p.stem, str(p)))
    return out


def write(rows: list[dict[str, Any]], meta: dict[str, Any], out_dir: Path, tag: str) -> Path:
    sys.path.insert(0, str(HERE))
    from _common import write_results

    cols = [
        ("model", "model"),
        ("mode", "start"),
        ("init_ms", "init ms"),
        ("init_cpu_ms", "init CPU ms"),
        ("driver_setup_ms", "of it, driver setup ms"),
        ("beyond_driver_ms", "beyond driver ms"),
        ("load_beyond_driver_ms", "of it, load() beyond driver ms"),
        ("first_invoke_ms", "first invoke ms"),
        ("first_result_ms", "first result beyond driver ms"),
        ("tenth_result_ms", "10th result beyond driver ms"),
        ("device_ready_ms", "on the device after ms"),
        ("cpu_invokes", "CPU invokes before"),
        ("invoke_ms", "steady invoke ms"),
        ("programs_built", "programs built"),
        ("program_binary_loads", "binaries loaded"),
        ("program_build_ms", "build ms (summed over threads)"),
        ("program_cubins_stored", "stored as cubin"),
        ("delegated_nodes", "delegated nodes"),
        ("output_sum", "output checksum"),
        ("error", "error"),
    ]
    return write_results("init" + (f"-{tag}" if tag else ""), meta, rows, cols, out_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=["zoo", "real", "all"], default="zoo")
    ap.add_argument("--models", default=None, help="names within the set (default: all)")
    ap.add_argument("--dir", action="append", default=None, help="--set real: .tflite folders")
    ap.add_argument("--modes", default="cold,driver_warm,serialization_warm")
    ap.add_argument("--repeats", type=int, default=1, help="starts per model and mode")
    ap.add_argument("--invoke-runs", type=int, default=0)
    ap.add_argument("--partitioning", default="all", help="'default': load()'s own")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument(
        "--cpu-warmup",
        nargs="?",
        const="on",
        choices=["on", "off"],
        help="load(cpu_warmup=True / False); without it, load()'s default (on)",
    )
    ap.add_argument("--tag", default="", help="names the result files (init-TAG-<device>)")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-options", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        r = child(args.child, json.loads(args.child_options), args.invoke_runs)
        print("RESULT " + json.dumps(r), flush=True)
        return 0
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; known: {MODES}")
    base: dict[str, Any] = {"precision": args.precision}
    if args.partitioning != "default":
        base["partitioning"] = args.partitioning
    if args.cpu_warmup:
        base["cpu_warmup"] = args.cpu_warmup == "on"
    rows: list[dict[str, Any]] = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-init-") as tmp:
        for name, path in models_of(args):
            for rep in range(args.repeats):
                for mode, r in measure(path, modes, base, args.invoke_runs, Path(tmp)).items():
                    row = {"model": name, "mode": mode, "repeat": rep, **r}
                    rows.append(row)
                    cells = " ".join(
                        f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                    )
                    print(f"{name:<28} {mode:<19} {cells}", flush=True)
                loads.append(os.getloadavg()[0])
    sys.path.insert(0, str(HERE))
    from _common import device_info

    meta = {
        **device_info(),
        "cpu_warmup": "default (on)",
        **base,
        "modes": modes,
        "repeats": args.repeats,
        "load_average_1min": [round(x, 2) for x in (min(loads), max(loads))],
        "host_cpus": os.cpu_count(),
        "build_threads": os.environ.get("CLGPU_BUILD_THREADS", "auto"),
    }
    print(f"wrote {write(rows, meta, Path(args.out), args.tag)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
