"""Is the default plan never slower than the CPU alone or than `partitioning="all"`? (issue #42)

Per model: the CPU alone (XNNPACK, --threads), the delegate with default options and with
`partitioning="all"`, each in its own interpreter in this one process, timed in balanced turns
(clgpu_delegate.planning.time_candidates, as plan() times them) after the delegates' setup is
done, with a delegate held from the start (planning.held_delegate: the context's first delegate
runs slower, and would be the default's), the default's and `all`'s delegates made in either
order on alternate rows (`made_first`: of two, the first made runs about 1 % slower); with
--per-plan K, K interpreters per column (the CPU's too) made in a snake order (C A B B A C C A B
...), each column their medians' mean, so that neither the order nor one instance's luck falls
on one column: delegates of one plan run up to several percent apart for no reason of theirs
(instance-spread-NVIDIA_H200.md); --balanced is --per-plan 2. A row passes when
default_ms <= 1.05 x min(cpu_ms, all_ms).

    python bench/never_slower.py [--zoo a,b] [--dir DIR ...] [--small] [--runs N]
        [--held-out N [--held-out-seeds S,S]] [--held-interpreter] [--per-plan K | --balanced]
        [--min-seconds S] [--tag T]
        [--out bench/results]

--small adds bench/small_models.py's set (keyword spotters float and int8, DS-CNNs, wide dense
layers, a PRELU CNN, layout-chain audio CNN); --held-out N --held-out-seeds 7,8 adds N models
per seed of those kinds with shapes drawn at random (small_models.held_out), which nothing was
tuned to. --held-interpreter also makes, per row, an untimed interpreter of the model whose
device buffers come first (research: whether the first-made candidate's slowness is its buffers').
Writes never-slower[-TAG]-<device>.json and .md after every row (meta `complete` once all ran);
each JSON row also carries the default's estimate of its first weighed partition (est_*).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.planning import Timed, _feeds, held_delegate, time_candidates
from clgpu_delegate.runtime import make_interpreter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models  # noqa: E402
from _common import results_base, run_meta  # noqa: E402
from cost_estimates import ESTIMATE, KINDS, PARTS, kind_fields  # noqa: E402

LIMIT = 1.05


def _models(args: argparse.Namespace) -> list[tuple[str, bytes]]:
    out = [(m, zoo.path(m).read_bytes()) for m in args.zoo.split(",") if m]
    for folder in args.dir:
        out += [
            (p.stem, p.read_bytes()) for p in sorted(Path(folder).expanduser().glob("*.tflite"))
        ]
    if args.small:
        out += [(name, make()) for name, make in small_models.models().items()]
    kinds = small_models.held_out_kinds(args.held_out_kinds)
    for seed in (int(x) for x in args.held_out_seeds.split(",") if args.held_out > 0 and x):
        drawn = small_models.held_out(args.held_out, seed, kinds, args.held_out_dynamic)
        out += [(name, make()) for name, make in drawn.items()]
    return out


def _node_count(data: bytes) -> int:
    """The main subgraph's nodes: with the delegated counts, whether a model runs whole."""
    import tflite

    return int(tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).OperatorsLength())


def _held_interpreter(data: bytes, args: argparse.Namespace) -> Any:
    """--held-interpreter: an interpreter of the model with its own `all` delegate, allocated
    and run once before the candidates are made, kept until they are timed, never timed: the
    row's first device buffers are its, not a candidate's. (The held delegate allocates none;
    on some machines the first-made candidate of one plan still ran 3.5 % slower,
    bench/results/never-slower-NVIDIA_H200.md.)"""
    d = clgpu_delegate.load(partitioning="all")
    t = Timed(lambda: (d, make_interpreter(data, [d], num_threads=args.threads)))
    t.interp.allocate_tensors()
    d.wait_ready()
    t.run(_feeds(t.inputs, 0))
    return t


def _time(
    data: bytes, args: argparse.Namespace, cpu_device: bool, all_first: bool
) -> dict[str, Any]:
    held = _held_interpreter(data, args) if args.held_interpreter else None
    made: dict[str, Timed] = {}
    plans: list[tuple[str, dict[str, str] | None]] = [
        ("default", {}),
        ("all", {"partitioning": "all"}),
    ]
    columns = [("cpu", None), *(plans[::-1] if all_first else plans)]
    order = []
    for i in range(args.per_plan):  # a snake: C A B, B A C, C A B, ...
        order += [(name if i == 0 else f"{name}#{i + 1}", opts)
                  for name, opts in (columns if i % 2 == 0 else columns[::-1])]
    for name, opts in order:
        d = None if opts is None else clgpu_delegate.load(**opts)
        made[name] = Timed(
            lambda d=d: (d, make_interpreter(data, [d] if d else None, num_threads=args.threads))
        )
    for t in made.values():
        t.interp.allocate_tensors()
        if t.delegate is not None:
            t.delegate.wait_ready()
    feeds = _feeds(made["cpu"].inputs, 0)
    time_candidates(list(made.values()), feeds, args.runs, 3, 1, cpu_device, args.min_seconds)
    row: dict[str, Any] = {}
    for k in ("cpu", "default", "all"):
        # Made in order (the dict keeps it), so `each` lists the column's instances as made.
        mine = [t for n, t in made.items() if n.split("#")[0] == k]
        each = [statistics.median(t.times) for t in mine]
        # Per plan K > 1: the mean of the column's instances, made early and late alike, so
        # that neither column carries the order's cost or one instance's spread alone.
        row[f"{k}_ms"] = statistics.fmean(each)
        if len(each) > 1:
            row[f"{k}_ms_each"] = each
        if k == "cpu":
            continue
        if len(each) > 1:
            row[f"{k}_nodes_each"] = [len(t.delegate.delegated_nodes()) for t in mine]
        d = made[k].delegate
        row[f"{k}_nodes"] = len(d.delegated_nodes())
        row[f"{k}_partitions"] = len(d.partitions())
        # Its partitions' invokes in the one-launch split-K form (runtime/launch_forms.h): two
        # delegates of one plan may keep different forms until they measure again.
        s = d.stats()
        row[f"{k}_fewer_form"] = s.fewer_launch_invokes / s.invokes if s.invokes else 0.0
        # What its pairs of invokes measured (fewer / other form), beside the form it kept.
        row[f"{k}_pair_ratio"] = s.launch_form_pair_ratio
    row["made_first"] = ("all" if all_first else "default") + (
        f" (x{args.per_plan}, snake)" if args.per_plan > 1 else "")
    # The default's estimate of its first weighed partition, kept or not: why it decided so.
    texts = " ".join(f"{x.reason} {x.note}" for x in made["default"].delegate.decisions())
    if m := ESTIMATE.search(texts):
        row.update(est_device_ms=float(m[1]), est_kernels=int(m[2]), est_cpu_ms=float(m[3]))
        if parts := PARTS.search(texts):
            row["est_us_per_kernel"] = float(parts[1])
            row["est_arith_ms"], row["est_floors_ms"] = float(parts[2]), float(parts[3])
        if kinds := KINDS.search(texts):
            row.update(kind_fields(kinds))
    del held  # kept alive through the timing
    row["model_nodes"] = _node_count(data)
    row["ratio"] = row["default_ms"] / min(row["cpu_ms"], row["all_ms"])
    row["passes"] = row["ratio"] <= LIMIT
    return row


def _launch_levels() -> dict[str, Any]:
    """This machine's cost per small kernel as the calibration reads it (us): at a delegate's
    load, and refined (the lower of the driver's two launch levels over a longer window, plus
    the extra its constants were fitted with: RefinedDeviceCosts, docs/partitioning.md).
    Measured after the rows, so that no row's estimate sees the refinement. The tables' device
    time per launch differs between machines of one kind by about as much as the close calls'
    margins; this records each machine's figure beside it."""
    try:
        d = clgpu_delegate.load()
        load = d.stats().calibration_kernel_us
        d._native._refine_calibration()
        s = d.stats()
        return {"load_us": round(load, 2), "refined_us": round(s.calibration_kernel_us, 2),
                "source": s.calibration_source, "refined": s.calibration_refined}
    except Exception as e:  # noqa: BLE001 - a record beside the table, not part of it
        return {"error": str(e).splitlines()[0][:160] if str(e) else type(e).__name__}


def _column(r: dict[str, Any], plan: str) -> str:
    """A column's cell: its time, and with --per-plan K > 1 each instance's in brackets."""
    each = r.get(f"{plan}_ms_each")
    return f"{r[f'{plan}_ms']:.3f}" + (f" ({', '.join(f'{x:.3f}' for x in each)})" if each else "")


def _order_text(meta: dict[str, Any]) -> str:
    k = meta["per_plan"]
    if k > 1:
        return (f"{k} interpreters per column (CPU, default, all) made in a snake order (C A B "
                "B A C ...; A: made first), each column their mean (each in brackets, in the "
                "order made)")
    return ("the default's and `all`'s delegates made in either order on alternate rows (made "
            "first)")


def _markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    ran = [r for r in rows if "skipped" not in r]
    failing = [r["model"] for r in ran if not r["passes"]]
    md = [
        f"# Never slower than the CPU: {meta['device']}",
        "",
        f"driver {meta['driver']}, {meta['date']}, CPU threads {meta['cpu_threads']}, default "
        f"options, medians of >= {meta['runs']} runs and >= {meta['min_seconds']} s per model in "
        "balanced turns in one process; "
        + _order_text(meta),
        "",
        f"command: `{meta['command']}`",
        "",
        f"the calibration's kernel figure after the rows: {meta.get('launch_levels', {})}",
        "",
        ("" if meta.get("complete", True) else "**cut short: the rows the run reached**\n\n")
        + f"rows: {len(ran)}; default <= {LIMIT} x min(CPU, all) on {len(ran) - len(failing)}"
        + (f"; not on: {', '.join(failing)}" if failing else ""),
        "",
        "| model | CPU ms | default ms | all ms | default / min(CPU, all) | nodes default / all "
        "/ model | partitions default / all | made first |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            md.append(f"| {r['model']} | skipped: {r['skipped']} |||||||")
            continue
        md.append(
            f"| {r['model']} | {_column(r, 'cpu')} | {_column(r, 'default')} | "
            f"{_column(r, 'all')} | "
            f"{r['ratio']:.2f}{'' if r['passes'] else ' **over**'} | "
            f"{r['default_nodes']} / {r['all_nodes']} / {r.get('model_nodes', '?')} | "
            f"{r['default_partitions']} / {r['all_partitions']} | {r.get('made_first', '')} |"
        )
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", default=",".join(zoo.MODELS), help="built-in models")
    ap.add_argument("--dir", action="append", default=[], help="a folder of .tflite files")
    ap.add_argument("--small", action="store_true", help="add bench/small_models.py's set")
    ap.add_argument(
        "--held-out", type=int, default=0, metavar="N",
        help="add N models per seed of the small set's kinds with shapes drawn at random",
    )
    ap.add_argument("--held-out-seeds", default="1", help="comma-separated draws for --held-out")
    ap.add_argument(
        "--held-out-kinds", default="", help="small_models.py's --held-out-kinds (image: MobileNet)"
    )
    ap.add_argument(
        "--held-out-dynamic", action="store_true", help="small_models.py's --held-out-dynamic"
    )
    ap.add_argument("--runs", type=int, default=30, help="at least this many runs per plan")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="per model, all plans")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads")
    ap.add_argument(
        "--made-first",
        choices=("alternate", "default", "all"),
        default="alternate",
        help="which plan's delegate each row makes first (alternate: every other row)",
    )
    ap.add_argument(
        "--per-plan", type=int, default=1, metavar="K",
        help="K interpreters per column (CPU too), made in a snake order; a column is their mean",
    )
    ap.add_argument("--balanced", action="store_true", help="the same as --per-plan 2")
    ap.add_argument(
        "--held-interpreter", action="store_true",
        help="per row, an untimed interpreter of the model with its buffers made first",
    )
    ap.add_argument("--tag", default="", help="file name part: never-slower-TAG-<device>")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args(argv)
    if args.balanced:
        args.per_plan = max(args.per_plan, 2)
    if args.per_plan < 1:
        ap.error("--per-plan must be at least 1")
    dev = clgpu_delegate.select_device("auto")
    rows: list[dict[str, Any]] = []
    held = held_delegate()  # neither default nor all is the context's first delegate
    meta = run_meta(
        dev.name, dev.driver_version, cpu_threads=args.threads, runs=args.runs,
        min_seconds=args.min_seconds, held_interpreter=args.held_interpreter,
        per_plan=args.per_plan,
    )
    base = results_base(args.out, "never-slower", args.tag, dev.name)

    def write(complete: bool) -> None:
        # After every row: a run cut short (a device visit's time) keeps the rows it reached.
        meta["complete"] = complete
        Path(f"{base}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
        Path(f"{base}.md").write_text(_markdown(meta, rows))

    for name, data in _models(args):
        try:
            make_interpreter(data).allocate_tensors()
        except Exception as e:  # noqa: BLE001 - custom ops etc.: the CPU itself cannot run it
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            rows.append({"model": name, "skipped": f"the CPU interpreter fails: {why}"[:160]})
            write(False)
            print(f"{name:<36} skipped", flush=True)
            continue
        # Of two delegates with one plan, the one made first ran about 1 % slower in turns
        # (bench/results/first-delegate-NVIDIA_H200.md; pose_detection, 2026-11-27: default /
        # all 1.002-1.009 made first, 0.989-0.993 made second): every other row makes `all` first.
        # --made-first tells an order effect from a model's own (a row over with the same plan).
        all_first = {"alternate": len(rows) % 2 == 1, "default": False, "all": True}
        row = {"model": name, **_time(data, args, dev.type == "cpu", all_first[args.made_first])}
        rows.append(row)
        write(False)  # before the row's line: a reader of that line finds it in the files
        print(
            f"{name:<36} cpu {row['cpu_ms']:8.3f} default {row['default_ms']:8.3f} all "
            f"{row['all_ms']:8.3f}  {row['ratio']:.2f}{'' if row['passes'] else '  OVER'}",
            flush=True,
        )
    held.close()
    meta["launch_levels"] = _launch_levels() if dev.type != "cpu" else {}
    write(True)
    print(Path(f"{base}.md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
