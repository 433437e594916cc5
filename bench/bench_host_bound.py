"""Whether a model's invoke is bound by the host or by the device, and how that moves between
processes and over time: each model runs in several fresh processes, each timing windows of
invokes (delegate alone, `partitioning="all"`), and per window reports the median invoke and
the host's time per invoke split where the last command was enqueued
(`DelegateStats.host_enqueue_us` / `host_wait_us`, no profiling events).

    python bench/bench_host_bound.py --models m1.tflite,zoo_name,... [--processes 4]
        [--windows 6] [--per-window 200] [--precision fp32|fp16|auto] [--tag NAME]
        [--out bench/results]

An invoke whose wait is a few microseconds and whose enqueue is nearly all of it is bound by
the host: its time is the number of commands times the host's cost of one (docs/performance.md),
and changes with the host's speed, not the device's. Writes host-bound[-TAG]-<device>.json
and .md (device, driver, host kernel, date, command).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def split(s0: Any, s1: Any, key: str, n: int) -> float | None:
    if not hasattr(s1, key):
        return None
    return round((getattr(s1, key) - getattr(s0, key)) / n / 1e3, 4)


def child(model: str, windows: int, per: int, precision: str = "fp32") -> list[dict[str, Any]]:
    """Windows of invokes in this process."""
    import numpy as np

    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(partitioning="all", precision=precision)
    it = make_interpreter(model, [d])
    it.allocate_tensors()
    d.wait_ready()
    rng = np.random.default_rng(0)
    for det in it.get_input_details():
        it.set_tensor(det["index"], rng.standard_normal(det["shape"]).astype(det["dtype"]))
    for _ in range(30):
        it.invoke()
    out = []
    for _ in range(windows):
        s0 = d.stats()
        ts = []
        for _ in range(per):
            t = time.perf_counter()
            it.invoke()
            ts.append((time.perf_counter() - t) * 1e3)
        s1 = d.stats()
        n = max(s1.invokes - s0.invokes, 1)
        out.append(
            {
                "median_ms": round(statistics.median(ts), 4),
                # None from builds older than these counters (before/after comparisons).
                "enqueue_ms": split(s0, s1, "host_enqueue_us", n),
                "wait_ms": split(s0, s1, "host_wait_us", n),
            }
        )
    return out


def resolve(name: str) -> str:
    if name.endswith(".tflite"):
        return name
    from clgpu_delegate.modelgen import zoo

    return str(zoo.path(name))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help=".tflite paths or zoo names, comma-separated")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--windows", type=int, default=6)
    ap.add_argument("--per-window", type=int, default=200)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--precision", default="fp32", help="load()'s precision: fp32, fp16, auto")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        rows = child(args.child, args.windows, args.per_window, args.precision)
        print("RESULT " + json.dumps(rows), flush=True)
        return 0
    if not args.models:
        ap.error("--models is required")
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        path = resolve(name)
        for proc in range(args.processes):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", path]
            cmd += ["--windows", str(args.windows), "--per-window", str(args.per_window)]
            cmd += ["--precision", args.precision]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            got = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if not got:
                rows.append({"model": Path(name).stem, "process": proc,
                             "error": (p.stderr.strip() or "?")[-200:]})
                continue
            wins = json.loads(got[0][7:])
            med = [w["median_ms"] for w in wins]
            enq = [w["enqueue_ms"] for w in wins if w["enqueue_ms"] is not None]
            wait = [w["wait_ms"] for w in wins if w["wait_ms"] is not None]
            rows.append(
                {
                    "model": Path(name).stem,
                    "process": proc,
                    "windows_ms": " ".join(f"{m:.3f}" for m in med),
                    "median_ms": round(statistics.median(med), 4),
                    "enqueue_ms": round(statistics.median(enq), 4) if enq else None,
                    "wait_ms": round(statistics.median(wait), 4) if wait else None,
                    "windows": wins,
                }
            )
            print({k: v for k, v in rows[-1].items() if k != "windows"}, flush=True)
    sys.path.insert(0, str(HERE))
    from _common import device_info, write_results

    meta = {**device_info(), "host_cpus": os.cpu_count(), "kernel": os.uname().release,
            "processes": args.processes, "windows": args.windows, "per_window": args.per_window,
            "precision": args.precision}
    cols = [
        ("model", "model"),
        ("process", "process"),
        ("windows_ms", "median invoke ms per window"),
        ("median_ms", "median of windows ms"),
        ("enqueue_ms", "host enqueue ms / invoke"),
        ("wait_ms", "host wait ms / invoke"),
        ("error", "error"),
    ]
    stem = "host-bound" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
