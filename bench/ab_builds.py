"""Two builds of the delegate on the same models in one process: each build's Python-free
plugin (libclgpu_delegate.so) loaded with `load_delegate`, the interpreters timed in balanced
turns (planning.time_candidates, as plan() times its candidates). A refactor's A/B: two
processes of one build differ by 10-60 % on host-bound models (docs/performance.md), two
interpreters of one process by a few per cent.

    python bench/ab_builds.py --base BASE/libclgpu_delegate.so --new NEW/libclgpu_delegate.so \
        [--zoo mobilenet_v2,resnet50] [--dir DIR ...] [--models a,b] [--option key=value ...] \
        [--runs 300] [--min-seconds 1] [--tag NAME] [--out bench/results]

Both plugins get the same options (`--option`; cpu_warmup=false is added unless given, so each
build's kernels are ready when its interpreter is: the plugin has no wait_ready()). Rows: model,
each side's median and fastest run, new / base, and each side's partitions. Writes
ab-builds[-TAG]-<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import device_info, write_results  # noqa: E402

from clgpu_delegate.planning import Timed, time_candidates  # noqa: E402
from clgpu_delegate.runtime import interpreter_module, make_interpreter  # noqa: E402


def models(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(name, path) of each model: the zoo's, then each folder's .tflite files."""
    from clgpu_delegate.modelgen import zoo

    out = [(n, str(zoo.path(n))) for n in args.zoo.split(",") if n]
    wanted = set(args.models.split(",")) if args.models else None
    for d in args.dir:
        out += [
            (p.stem, str(p))
            for p in sorted(Path(d).glob("*.tflite"))
            if wanted is None or p.stem in wanted
        ]
    return out


def partitions(interp: Any) -> int:
    """DELEGATE nodes in the primary subgraph (the plugin has no stats; -1: unknown): the
    plugin's partitions and XNNPACK's, which the runtime applies to what the plugin leaves."""
    try:
        ops = interp._get_ops_details()  # both runtimes; private, hence the fallback
    except AttributeError:
        return -1
    return sum(1 for op in ops if op.get("op_name") == "DELEGATE")


def one_model(
    path: str, plugins: dict[str, str], options: dict[str, str], runs: int, min_seconds: float
) -> dict[str, Any]:
    mod = interpreter_module()
    timed: dict[str, Timed] = {}
    for side, lib in plugins.items():

        def make(lib: str = lib) -> tuple[Any, Any]:
            d = mod.load_delegate(lib, options)
            it = make_interpreter(path, [d])
            it.allocate_tensors()
            return None, it

        timed[side] = Timed(make)
    rng = np.random.default_rng(0)
    first = timed["base"]
    feeds = [
        rng.standard_normal(x["shape"]).astype(x["dtype"])
        if np.issubdtype(x["dtype"], np.floating)
        else rng.integers(-20, 20, x["shape"]).astype(x["dtype"])
        for x in first.inputs
    ]
    time_candidates(
        list(timed.values()), feeds, runs, 5, 0, cpu_device=False, min_seconds=min_seconds
    )
    base = statistics.median(first.times)
    row: dict[str, Any] = {}
    for side, t in timed.items():
        row[f"{side}_ms"] = statistics.median(t.times)
        row[f"{side}_min_ms"] = min(t.times)
        row[f"{side}_partitions"] = partitions(t.interp)
    row["new_over_base"] = row["new_ms"] / base
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the base build's libclgpu_delegate.so")
    ap.add_argument("--new", required=True, help="the new build's libclgpu_delegate.so")
    ap.add_argument("--zoo", default="", help="built-in models, comma-separated")
    ap.add_argument("--dir", action="append", default=[], help="a folder of .tflite files")
    ap.add_argument("--models", default="", help="only these names from the folders")
    ap.add_argument("--option", action="append", default=[], help="key=value for both plugins")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    options = dict(o.split("=", 1) for o in args.option)
    options.setdefault("cpu_warmup", "false")
    plugins = {"base": args.base, "new": args.new}
    for side, lib in plugins.items():
        if not Path(lib).is_file():
            ap.error(f"--{side} {lib} is not a file")
    rows = []
    for name, path in models(args):
        try:
            row = {"model": name, **one_model(path, plugins, options, args.runs, args.min_seconds)}
        except Exception as e:  # one model's failure is a row, not the end of the run
            row = {"model": name, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
        print(row, flush=True)
        rows.append(row)
    cols = [("model", "model")]
    for side in plugins:
        cols += [(f"{side}_ms", f"{side} median ms"), (f"{side}_min_ms", f"{side} min ms")]
    cols += [
        ("new_over_base", "new / base"),
        ("base_partitions", "partitions base"),
        ("new_partitions", "partitions new"),
        ("error", "error"),
    ]
    meta = {
        **device_info(),
        "plugins": plugins,
        "options": options,
        "runs": args.runs,
        "min_seconds": args.min_seconds,
    }
    stem = "ab-builds" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
