"""Is the first delegate of a process's OpenCL context slower than the ones after it? Per model,
two delegates of the same options (so the same plan) are made one after the other, next to the
CPU interpreter, and timed in balanced turns (planning.time_candidates); the row is the first's
median over the second's. Each pair is made in a fresh context (the one before is freed), so the
first is that context's first delegate; `--held` keeps one more delegate from the start, made
before every pair and never timed (planning.held_delegate), as never_slower.py, bench_plans.py,
ab_options.py and plan() now do.

    python bench/first_delegate.py MODEL.tflite ... [--pairs all,all default,all]
        [--held] [--runs 20] [--min-seconds 1] [--tag T] [--out bench/results]

A pair "a,b" names the options of the first and the second delegate: "all" is
partitioning="all", "default" load()'s defaults. Writes first-delegate[-TAG]-<device>.json and
.md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, device_info, write_results  # noqa: E402

import clgpu_delegate  # noqa: E402
from clgpu_delegate.planning import Timed, _feeds, held_delegate, time_candidates  # noqa: E402
from clgpu_delegate.runtime import make_interpreter  # noqa: E402

OPTIONS: dict[str, dict[str, Any]] = {"all": {"partitioning": "all"}, "default": {}}


def first_over_second(data: bytes, pair: str, runs: int, seconds: float, threads: int) -> float:
    a, b = (OPTIONS[k] for k in pair.split(","))
    made = {"cpu": Timed(lambda: (None, make_interpreter(data, None, num_threads=threads)))}
    for name, opts in (("first", a), ("second", b)):
        d = clgpu_delegate.load(**opts)
        made[name] = Timed(lambda d=d: (d, make_interpreter(data, [d], num_threads=threads)))
    for t in made.values():
        t.interp.allocate_tensors()
        if t.delegate is not None:
            t.delegate.wait_ready()
    time_candidates(list(made.values()), _feeds(made["cpu"].inputs, 0), runs, 3, 1, False, seconds)
    ratio = statistics.median(made["first"].times) / statistics.median(made["second"].times)
    made.clear()
    gc.collect()  # the pair's context goes with it, unless a held delegate keeps it
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help=".tflite paths")
    ap.add_argument("--pairs", nargs="+", default=["all,all", "default,all"])
    ap.add_argument("--held", action="store_true", help="hold a delegate from the start")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    for p in a.pairs:
        if len(p.split(",")) != 2 or any(k not in OPTIONS for k in p.split(",")):
            ap.error(f"a pair is two of {sorted(OPTIONS)} joined by a comma, not {p!r}")
    held = held_delegate() if a.held else None
    rows = []
    for path in a.models:
        data = Path(path).read_bytes()
        row: dict[str, Any] = {"model": Path(path).stem}
        for p in a.pairs:
            row[p] = first_over_second(data, p, a.runs, a.min_seconds, a.threads)
        rows.append(row)
        print(row, flush=True)
    if held is not None:
        held.close()
    n = len(rows)
    rows.append({"model": "mean"} | {p: statistics.mean(r[p] for r in rows[:n]) for p in a.pairs})
    rows.append({"model": "rows above 1"} | {p: sum(r[p] > 1 for r in rows[:n]) for p in a.pairs})
    meta = {**device_info(), "held": a.held, "runs": a.runs, "min_seconds": a.min_seconds,
            "threads": a.threads, "command": " ".join(["python", *sys.argv])}
    name = "first-delegate" + (f"-{a.tag}" if a.tag else "")
    cols = [("model", "model")] + [(p, f"{p}: first / second") for p in a.pairs]
    print(f"wrote {write_results(name, meta, rows, cols, a.out)}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
