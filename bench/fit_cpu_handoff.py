"""Fits the CPU side's hand-off per node by kind (src_cpp/delegate/cpu_costs.cc) to the CPU times
of never_slower.py tables: how long XNNPACK takes to hand a node between its threads, by what it
makes of the node (a float convolution, an int8 one, a FULLY_CONNECTED, anything else).

Each table row carries the default's CPU estimate of its partition (est_cpu_ms), made with the
hand-offs of the build that wrote it (--table-handoff). Where that partition is the whole model
(one partition of `all`, every node but the edge conversions), the estimate less those hand-offs
is the model's arithmetic and traffic as the cost model counts them; the fit puts new hand-offs
on the model's nodes by kind and minimises a soft-L1 loss of log(estimate / measured) over a
grid (numpy only). It reports the median |log| and the rows whose decision breaks the
never-slower rule (margin 1: the partition kept where its device estimate is below the CPU's),
before and after.

    python bench/fit_cpu_handoff.py --measured NEVER_SLOWER.json [--measured ...] \\
        [--dir DIR ...] [--small] [--held-out 24 --held-out-seeds 15,16] \\
        [--sources-from-commands] [--table-handoff 4.7,4.7,4.7,4.7] [--table-small-conv US,N] \\
        [--handoff F,I,FC,O] [--small-conv US,N | --fit-small-conv] [--tag NAME] [--out DIR]

--handoff: weigh these figures (float conv, int8 conv, FULLY_CONNECTED, other; us at 16
threads) instead of fitting. --small-conv US,N: a convolution's hand-off rises from US at no
output to its kind's figure at N output elements (as cpu_costs.cc counts it); --fit-small-conv
fits US and N with the kinds at --handoff's figures (else the table's); --table-small-conv: the
tables' build's ramp. --sources-from-commands: the held-out draws each table's command names
(seeds, --held-out-kinds, --held-out-dynamic) join the models. Writes
cpu-handoff[-TAG]-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tflite

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models  # noqa: E402
from _common import RESULTS, write_results  # noqa: E402

from clgpu_delegate.modelgen import zoo  # noqa: E402
from clgpu_delegate.report import op_name  # noqa: E402

KINDS = ("float_conv", "int8_conv", "fc", "other")
_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def node_kinds(data: bytes) -> dict[str, int]:
    """The main subgraph's nodes by hand-off kind (as ops/op_handler.h CpuHandoff, int8 by the
    output's type)."""
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)
    out: collections.Counter[str] = collections.Counter()
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = op_name(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
        outs = op.OutputsAsNumpy() if op.OutputsLength() else []
        int8 = len(outs) > 0 and g.Tensors(int(outs[0])).Type() in (3, 9)
        if name in _CONVS:
            out["int8_conv" if int8 else "float_conv"] += 1
        else:
            out["fc" if name == "FULLY_CONNECTED" else "other"] += 1
    return {k: out[k] for k in KINDS}


def conv_outputs(data: bytes) -> dict[str, list[float]]:
    """Each convolution's output elements, by hand-off kind (float_conv, int8_conv)."""
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)
    out: dict[str, list[float]] = {"float_conv": [], "int8_conv": []}
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        if op_name(max(code.BuiltinCode(), code.DeprecatedBuiltinCode())) not in _CONVS:
            continue
        t = g.Tensors(int(op.OutputsAsNumpy()[0]))
        dims = [max(1, int(d)) for d in t.ShapeAsNumpy()] if t.ShapeLength() else [1]
        out["int8_conv" if t.Type() in (3, 9) else "float_conv"].append(float(np.prod(dims)))
    return out


def _command_draws(path: str) -> list[tuple[int, int, str, bool]]:
    """The held-out draws a table's command names: (count, seed, kinds, dynamic)."""
    command = json.loads(Path(path).read_text()).get("meta", {}).get("command", "")
    m = re.search(r"--held-out (\d+) --held-out-seeds (\S+)", command)
    if not m:
        return []
    kinds = re.search(r"--held-out-kinds (\S+)", command)
    return [
        (int(m[1]), int(x), kinds[1] if kinds else "", "--held-out-dynamic" in command)
        for x in m[2].split(",") if x
    ]


def model_sources(args: argparse.Namespace) -> dict[str, Callable[[], bytes]]:
    """Model name -> its bytes, from --dir, --small, --held-out and the zoo (and with
    --sources-from-commands the draws of the tables' commands)."""
    src: dict[str, Callable[[], bytes]] = {n: (lambda n=n: zoo.MODELS[n]()) for n in zoo.MODELS}
    if args.small:
        src.update(small_models.models())
    for s in (int(x) for x in args.held_out_seeds.split(",") if x and args.held_out):
        src.update(small_models.held_out(args.held_out, s))
    if args.sources_from_commands:
        draws = {d for path in args.measured for d in _command_draws(path)}
        for count, seed, kinds, dynamic in sorted(draws):
            chosen = small_models.held_out_kinds(kinds)
            src.update(small_models.held_out(count, seed, chosen, dynamic))
    for d in args.dir:
        for p in sorted(Path(d).glob("*.tflite")):
            src[p.stem] = lambda p=p: p.read_bytes()
    return src


def whole_model_rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The tables' rows whose estimate is of the whole model, with its nodes by kind."""
    src = model_sources(args)
    kinds: dict[str, dict[str, int]] = {}
    sizes: dict[str, dict[str, list[float]]] = {}
    rows, meta = [], {}
    for path in args.measured:
        data = json.loads(Path(path).read_text())
        meta = meta or data.get("meta", {})
        for r in data["rows"]:
            name = r["model"]
            if r.get("est_cpu_ms") is None or r.get("all_partitions") != 1 or name not in src:
                continue
            if name not in kinds:
                data = src[name]()
                kinds[name], sizes[name] = node_kinds(data), conv_outputs(data)
            if r.get("all_nodes", 0) < sum(kinds[name].values()) - 2:
                continue  # the estimate is of a part of the model
            rows.append(
                {**r, "table": Path(path).stem, "kinds": kinds[name], "sizes": sizes[name]}
            )
    return rows, meta


Ramp = tuple[float, float] | None  # a convolution's hand-off at no output, and where it is full


def handoffs(rows: list[dict[str, Any]], handoff: np.ndarray, ramp: Ramp) -> np.ndarray:
    """Each row's hand-offs (us): `handoff` per node by kind; with `ramp` (US, N) a
    convolution's rises from US at no output to its kind's figure at N output elements."""
    counts = np.array([[r["kinds"][k] for k in KINDS] for r in rows], dtype=float)
    if ramp is None:
        return counts @ handoff
    small, full_at = ramp
    out = counts[:, 2:] @ handoff[2:]
    for i, r in enumerate(rows):
        for k, kind in enumerate(KINDS[:2]):
            share = np.minimum(1.0, np.asarray(r["sizes"][kind], dtype=float) / full_at)
            out[i] += float(np.sum(small + (handoff[k] - small) * share))
    return out


def estimates(
    rows: list[dict[str, Any]], table: np.ndarray, handoff: np.ndarray,
    table_ramp: Ramp = None, ramp: Ramp = None,
) -> np.ndarray:
    """Each row's CPU estimate (us) with `handoff` (and `ramp`) for `table`'s figures (and
    `table_ramp`)."""
    est = np.array([r["est_cpu_ms"] * 1e3 for r in rows])
    return est - handoffs(rows, table, table_ramp) + handoffs(rows, handoff, ramp)


def _soft_l1(r: np.ndarray) -> float:
    return float(np.sum(2 * (np.sqrt(1 + (r / 0.2) ** 2) - 1)))


def fit(rows: list[dict[str, Any]], table: np.ndarray) -> np.ndarray:
    """The hand-offs by kind (us) of least loss, over a grid of half-us steps."""
    y = np.log([r["cpu_ms"] * 1e3 for r in rows])

    def loss(h: tuple[float, ...]) -> float:
        return _soft_l1(np.log(np.maximum(estimates(rows, table, np.array(h)), 1e-3)) - y)

    grid = [np.arange(1.0, 14.01, 0.5)] * 2 + [np.arange(0.5, 9.01, 0.5)] * 2
    return np.array(min(itertools.product(*grid), key=loss))


def fit_ramp(
    rows: list[dict[str, Any]], table: np.ndarray, handoff: np.ndarray, table_ramp: Ramp
) -> tuple[float, float]:
    """The convolutions' ramp (US at no output, full at N elements) of least loss."""
    y = np.log([r["cpu_ms"] * 1e3 for r in rows])

    def loss(ramp: tuple[float, float]) -> float:
        e = estimates(rows, table, handoff, table_ramp, ramp)
        return _soft_l1(np.log(np.maximum(e, 1e-3)) - y)

    grid = itertools.product(
        np.arange(0.5, float(min(handoff[:2])) + 0.01, 0.5),
        [250.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0, 4000.0, 8000.0, 16000.0],
    )
    best = min(grid, key=loss)
    return float(best[0]), float(best[1])


def breaks(r: dict[str, Any], cpu_est_us: float) -> bool:
    """Whether margin 1 on this CPU estimate breaks the never-slower rule on the row."""
    kept = r["est_device_ms"] * 1e3 < cpu_est_us
    cpu, dev = r["cpu_ms"], r["all_ms"]
    return dev > 1.05 * cpu if kept else cpu > 1.05 * dev


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measured", action="append", required=True)
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--small", action="store_true", help="bench/small_models.py's set")
    ap.add_argument("--held-out", type=int, default=0, metavar="N")
    ap.add_argument("--held-out-seeds", default="")
    ap.add_argument("--table-handoff", default="4.7,4.7,4.7,4.7", help="the tables' build's")
    ap.add_argument("--handoff", default="", help="weigh these instead of fitting")
    ap.add_argument("--small-conv", default="", help="US,N: the convolutions' ramp to weigh")
    ap.add_argument("--fit-small-conv", action="store_true", help="fit the ramp")
    ap.add_argument("--table-small-conv", default="", help="US,N: the tables' build's ramp")
    ap.add_argument(
        "--sources-from-commands", action="store_true",
        help="add the held-out draws each table's command names",
    )
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    table = np.array([float(x) for x in args.table_handoff.split(",")])
    rows, table_meta = whole_model_rows(args)
    if not rows:
        ap.error("no row of the tables estimates a whole model of --dir / --small / --held-out")
    def ramp_of(text: str) -> Ramp:
        if not text:
            return None
        us, full_at = (float(x) for x in text.split(","))
        return us, full_at

    table_ramp, ramp = ramp_of(args.table_small_conv), ramp_of(args.small_conv)
    h = np.array([float(x) for x in args.handoff.split(",")]) if args.handoff else None
    if args.fit_small_conv:
        h = table if h is None else h
        ramp = fit_ramp(rows, table, h, table_ramp)
    elif h is None:
        h = fit(rows, table)
    old = estimates(rows, table, table, table_ramp, table_ramp)
    new = estimates(rows, table, h, table_ramp, ramp)
    y = np.array([r["cpu_ms"] * 1e3 for r in rows])
    out = []
    for r, o, n in zip(rows, old, new, strict=True):
        out.append(
            {
                "model": r["model"],
                "table": r["table"],
                "cpu_ms": r["cpu_ms"],
                "est_cpu_ms": round(o / 1e3, 4),
                "new_est_cpu_ms": round(n / 1e3, 4),
                "est_over_measured": round(o / (r["cpu_ms"] * 1e3), 3),
                "new_over_measured": round(n / (r["cpu_ms"] * 1e3), 3),
                "breaks": int(breaks(r, o)),
                "new_breaks": int(breaks(r, n)),
                **{f"n_{k}": r["kinds"][k] for k in KINDS},
            }
        )
    med = lambda e: float(np.median(np.abs(np.log(e / y))))  # noqa: E731
    meta = {
        "device": table_meta.get("device", "unknown"),
        "driver": table_meta.get("driver", ""),
        "tables": args.measured,
        "table_handoff_us": dict(zip(KINDS, table.tolist(), strict=True)),
        "handoff_us": dict(zip(KINDS, h.tolist(), strict=True)),
        "table_small_conv": table_ramp,
        "small_conv": ramp,
        "fitted": not args.handoff or args.fit_small_conv,
        "rows": len(rows),
        "median_abs_log_before": round(med(old), 3),
        "median_abs_log_after": round(med(new), 3),
        "breaks_before": sum(o["breaks"] for o in out),
        "breaks_after": sum(o["new_breaks"] for o in out),
    }
    print({k: meta[k] for k in list(meta)[4:]})
    cols = [(k, k) for k in out[0]]
    stem = "cpu-handoff" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, out, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
