"""Two or more option sets of the delegate on the same models, timed in balanced turns in one
process (planning.time_candidates, as plan() times its candidates): the steady-state cost of an
option, free of the 10-20 % one process can differ from the next. Each interpreter waits for
its device setup (cpu_warmup) before it is timed.

    python bench/ab_options.py --models mobilenet_v2,resnet50 [--dir DIR ...] \
        --sets 'warmup:cpu_warmup=true' 'build-first:cpu_warmup=false' [--runs 200] [--tag NAME]

A set is NAME:key=value,key=value (load()'s options; "true"/"false" and integers are parsed);
a key env.VAR sets that environment variable while the set's delegate loads, prepares and runs
its first invoke (the delegate's $CLGPU_* knobs, e.g. 'f4:partitioning=all,env.CLGPU_FLUSH=1,4':
an item without '=' continues the value before it). That first invoke binds the partitions again
where zero-copy wraps TFLite's tensors (NVIDIA's default), and the ops read their knobs as they
bind; a set whose delegate binds again while it is timed, outside its environment, gets an error
in its row instead of times.
Rows: model, and per set the median and the fastest-turn ms, each set's median over the first
set's, and the host's time per invoke until the last command was enqueued and waiting after it
(DelegateStats: which side a difference between two sets of one plan is on).
Writes bench/results/ab-options[-TAG]-<device>.{json,md} after every row (meta `complete` once
all ran).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import device_info, write_results  # noqa: E402
from bench_init import models_of  # noqa: E402

import clgpu_delegate as cd  # noqa: E402
from clgpu_delegate.planning import Timed, held_delegate, time_candidates  # noqa: E402
from clgpu_delegate.runtime import make_interpreter  # noqa: E402


def parse_set(text: str) -> tuple[str, dict[str, Any]]:
    name, _, body = text.partition(":")
    opts: dict[str, Any] = {}
    key = None
    for item in filter(None, body.split(",")):
        if "=" not in item and key is not None:  # a value with commas: "env.CLGPU_FLUSH=1,4"
            opts[key] = f"{opts[key]},{item}"
            continue
        key, _, v = item.partition("=")
        opts[key] = {"true": True, "false": False}.get(v, int(v) if v.lstrip("-").isdigit() else v)
    return name, opts


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """`env` set in os.environ inside the block, the earlier values back after it."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def prepared(path: str, opts: dict[str, Any], feeds: list[Any] | None = None) -> Timed:
    """A set's delegate and interpreter, loaded, prepared, set up and invoked once (on `feeds`,
    zeros when None) inside the set's environment: the invoke's bind, where zero-copy wraps
    TFLite's tensors, reads the set's knobs too."""
    import numpy as np

    env = {k[4:]: str(v) for k, v in opts.items() if k.startswith("env.")}
    with environment(env):
        d = cd.load(**{k: v for k, v in opts.items() if not k.startswith("env.")})
        t = Timed(lambda d=d: (d, make_interpreter(path, [d])))
        t.interp.allocate_tensors()
        d.wait_ready()
        xs = feeds or [np.zeros(x["shape"], x["dtype"]) for x in t.inputs]
        t.run(xs)
    return t


def one_model(path: str, sets: list[tuple[str, dict[str, Any]]], runs: int) -> dict[str, Any]:
    import numpy as np

    timed = {name: prepared(path, opts) for name, opts in sets}
    binds = {name: t.delegate.stats().binds for name, t in timed.items()}
    rng = np.random.default_rng(0)
    first = next(iter(timed.values()))
    feeds = [rng.standard_normal(x["shape"]).astype(x["dtype"]) for x in first.inputs]
    before = {name: t.delegate.stats() for name, t in timed.items()}
    time_candidates(list(timed.values()), feeds, runs, 5, 0, cpu_device=False)
    after = {name: t.delegate.stats() for name, t in timed.items()}
    rebound = [n for n in timed if after[n].binds != binds[n]]
    if rebound:
        raise RuntimeError(f"{', '.join(rebound)} bound again outside the set's environment")
    base = statistics.median(first.times)
    row: dict[str, Any] = {}
    for name, t in timed.items():
        med = statistics.median(t.times)
        row[f"{name}_ms"] = med
        row[f"{name}_min_ms"] = min(t.times)
        row[f"{name}_ratio"] = med / base
        row[f"{name}_nodes"] = len(t.delegate.delegated_nodes())
        row.update(host_split(name, before[name], after[name]))
    return row


def host_split(name: str, s0: Any, s1: Any) -> dict[str, float]:
    """A set's host time per invoke over its timed turns (their untimed openers too): until its
    last command was enqueued, and waiting after. Where two sets of one plan differ, this says
    whether the host or the device took the difference."""
    n = s1.invokes - s0.invokes
    if n <= 0:
        return {}
    return {
        f"{name}_enqueue_us": (s1.host_enqueue_us - s0.host_enqueue_us) / n,
        f"{name}_wait_us": (s1.host_wait_us - s0.host_wait_us) / n,
        # Partition invokes in the launch form with fewer launches (runtime/launch_forms.h).
        f"{name}_fewer_form": (s1.fewer_launch_invokes - s0.fewer_launch_invokes) / n,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=["zoo", "real", "all"], default="zoo")
    ap.add_argument("--models", default=None)
    ap.add_argument("--dir", action="append", default=None)
    ap.add_argument("--sets", nargs="+", required=True)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    sets = [parse_set(s) for s in args.sets]
    if len(sets) < 2:
        ap.error("give at least two --sets")
    cols = [("model", "model")]
    for name, _ in sets:
        cols += [(f"{name}_ms", f"{name} median ms"), (f"{name}_min_ms", f"{name} min ms")]
    cols += [(f"{name}_ratio", f"{name} / {sets[0][0]}") for name, _ in sets[1:]]
    for name, _ in sets:
        cols += [
            (f"{name}_enqueue_us", f"{name} enqueue us"),
            (f"{name}_wait_us", f"{name} wait us"),
            (f"{name}_fewer_form", f"{name} fewer-launch form share"),
        ]
    cols += [(f"{sets[0][0]}_nodes", "delegated nodes"), ("error", "error")]
    meta = {**device_info(), "sets": dict(sets), "runs": args.runs, "complete": False}
    stem = "ab-options" + (f"-{args.tag}" if args.tag else "")
    rows = []
    held = held_delegate()  # the first set's delegate is not the context's first
    for name, path in models_of(args):
        try:
            row = {"model": name, **one_model(path, sets, args.runs)}
        except Exception as e:  # one model's failure is a row, not the end of the run
            row = {"model": name, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
        rows.append(row)
        # After every row: a run cut short (a device visit's time) keeps the rows it reached.
        write_results(stem, meta, rows, cols, Path(args.out))
        print(row, flush=True)
    held.close()
    meta["complete"] = True
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
