"""How the delegate's invoke time depends on what the host did just before it: alone (invokes back
to back), right after a CPU-only invoke of the same model (XNNPACK on every core, as
bench/compare_cpu.py alternates them run by run), and after such a CPU invoke and a pause. The
timed figure of a comparison depends on it, which is why compare_cpu.py and bench_int8.py can
also take turns in blocks of runs (--block).

    python bench/bench_idle_gap.py MODEL.tflite [MODEL.tflite ...] --pause-ms 20 --rounds 6

Each row: the medians over `rounds` x 25 invokes per case, the cases interleaved by round in one
process. Results: bench/results/idle-gap-<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import device_info, write_results

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

PER_ROUND = 25


def measure(path: str, pause_ms: float, rounds: int) -> dict[str, Any]:
    d = clgpu_delegate.load()
    gpu = make_interpreter(path, [d])
    gpu.allocate_tensors()
    cpu = make_interpreter(path, None, num_threads=os.cpu_count())
    cpu.allocate_tensors()
    rng = np.random.default_rng(0)
    for det in gpu.get_input_details():
        x = rng.standard_normal(det["shape"]).astype(det["dtype"])
        gpu.set_tensor(det["index"], x)
        cpu.set_tensor(det["index"], x)
    for it in (gpu, cpu):
        for _ in range(10):
            it.invoke()

    def timed() -> float:
        t0 = time.perf_counter()
        gpu.invoke()
        return (time.perf_counter() - t0) * 1e3

    cases: dict[str, list[float]] = {"alone": [], "after_cpu": [], "after_cpu_pause": []}
    for _ in range(rounds):
        for _ in range(PER_ROUND):
            cases["alone"].append(timed())
        for _ in range(PER_ROUND):
            cpu.invoke()
            cases["after_cpu"].append(timed())
        for _ in range(PER_ROUND):
            cpu.invoke()
            time.sleep(pause_ms / 1e3)
            cases["after_cpu_pause"].append(timed())
    row: dict[str, Any] = {"model": Path(path).stem, "partitions": len(d.partitions())}
    row.update({k: statistics.median(v) for k, v in cases.items()})
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("models", nargs="+", help=".tflite files")
    p.add_argument("--pause-ms", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=6)
    a = p.parse_args()
    rows = []
    for m in a.models:
        rows.append(measure(m, a.pause_ms, a.rounds))
        print(rows[-1], flush=True)
    cols = [
        ("model", "model"),
        ("partitions", "partitions"),
        ("alone", "delegate alone ms"),
        ("after_cpu", "right after a CPU invoke ms"),
        ("after_cpu_pause", f"after a CPU invoke and a {a.pause_ms:g} ms pause, ms"),
    ]
    meta = {**device_info(), "cpu_threads": os.cpu_count(), "rounds": a.rounds}
    print(write_results("idle-gap", meta, rows, cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
