"""How far apart do delegates of one plan run in one process? Per model and round, K delegates
with `partitioning="all"` (so one plan) and the CPU interpreter, made after a held delegate and
timed in balanced turns (planning.time_candidates, as never_slower.py times its columns); each
delegate's median, and what its invokes spent enqueueing and waiting (`stats()`'s
host_enqueue_us and host_wait_us per invoke). A row's spread is its slowest delegate's median over
its fastest's: what a same-plan row of never_slower.py can differ by with no plan behind it.

    python bench/instance_spread.py MODEL ... [--k 4] [--rounds 4] [--runs 20]
        [--min-seconds 1.5] [--threads 16] [--option KEY=VALUE ...] [--tag T] [--out DIR]

`--option`: a load() option for every delegate (cpu_warmup=false: each made without the setup
thread). "first made / the others' mean": whether the order they were made in shows. A MODEL is
a .tflite path, a zoo name or a name of bench/small_models.py's set. Writes
instance-spread[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models  # noqa: E402
from _common import RESULTS, device_info, write_results  # noqa: E402

import clgpu_delegate  # noqa: E402
from clgpu_delegate.modelgen import zoo  # noqa: E402
from clgpu_delegate.planning import Timed, _feeds, held_delegate, time_candidates  # noqa: E402
from clgpu_delegate.runtime import make_interpreter  # noqa: E402


def model_bytes(name: str) -> bytes:
    small = small_models.models()
    if name in small:
        return small[name]()
    if name in zoo.MODELS:
        return zoo.path(name).read_bytes()
    return Path(name).read_bytes()


def one_round(
    data: bytes, k: int, runs: int, seconds: float, threads: int, seed: int, opts: dict[str, str]
) -> dict:
    made = {"cpu": Timed(lambda: (None, make_interpreter(data, None, num_threads=threads)))}
    for i in range(k):
        d = clgpu_delegate.load(**{"partitioning": "all", **opts})
        made[f"d{i}"] = Timed(lambda d=d: (d, make_interpreter(data, [d], num_threads=threads)))
    for t in made.values():
        t.interp.allocate_tensors()
        if t.delegate is not None:
            t.delegate.wait_ready()
    before = {n: t.delegate.stats() for n, t in made.items() if t.delegate is not None}
    time_candidates(
        list(made.values()), _feeds(made["cpu"].inputs, 0), runs, 3, seed, False, seconds
    )
    ms, enqueue, wait = [], [], []
    for n, s0 in before.items():
        s1 = made[n].delegate.stats()
        invokes = max(s1.invokes - s0.invokes, 1)
        ms.append(statistics.median(made[n].times))
        enqueue.append((s1.host_enqueue_us - s0.host_enqueue_us) / invokes)
        wait.append((s1.host_wait_us - s0.host_wait_us) / invokes)
    row = {
        "cpu_ms": statistics.median(made["cpu"].times),
        "ms": ms,
        "enqueue_us": enqueue,
        "wait_us": wait,
        "spread": max(ms) / min(ms),
        "first_over_rest": ms[0] / statistics.mean(ms[1:]),
    }
    made.clear()
    gc.collect()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--k", type=int, default=4, help="delegates of one plan per round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--min-seconds", type=float, default=1.5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="for every delegate"
    )
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    if a.k < 2:
        ap.error("--k needs at least two delegates to compare")
    if any("=" not in o for o in a.option):
        ap.error("--option takes KEY=VALUE")
    opts = dict(o.split("=", 1) for o in a.option)
    held = held_delegate()
    rows: list[dict[str, Any]] = []
    for m in a.models:
        data = model_bytes(m)
        for r in range(a.rounds):
            row = {
                "model": Path(m).stem,
                "round": r,
                **one_round(data, a.k, a.runs, a.min_seconds, a.threads, r, opts),
            }
            rows.append(row)
            print(row, flush=True)
    held.close()
    for row in rows:
        row["ms"] = " ".join(f"{x:.3f}" for x in row["ms"])
        row["enqueue_us"] = " ".join(f"{x:.0f}" for x in row["enqueue_us"])
        row["wait_us"] = " ".join(f"{x:.0f}" for x in row["wait_us"])
    spreads = [r["spread"] for r in rows]
    meta = {
        **device_info(),
        "k": a.k,
        "rounds": a.rounds,
        "runs": a.runs,
        "min_seconds": a.min_seconds,
        "threads": a.threads,
        "spread_median": statistics.median(spreads),
        "spread_max": max(spreads),
        "rows_over_1.05": sum(s > 1.05 for s in spreads),
        "first_over_rest_median": statistics.median(r["first_over_rest"] for r in rows),
        "options": opts,
        "command": " ".join(["python", *sys.argv]),
    }
    name = "instance-spread" + (f"-{a.tag}" if a.tag else "")
    cols = [
        ("model", "model"),
        ("round", "round"),
        ("cpu_ms", "CPU ms"),
        ("ms", "each delegate's median ms"),
        ("enqueue_us", "enqueue us per invoke"),
        ("wait_us", "wait us per invoke"),
        ("spread", "slowest / fastest"),
        ("first_over_rest", "first made / the others' mean"),
    ]
    print(f"wrote {write_results(name, meta, rows, cols, a.out)}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
