"""The cost model's estimates against measured times (issue #42: where a default decision goes
wrong, which side of the estimate is off). For each model the default delegate's estimate of
its partition on the device and on the CPU (what `clgpu-delegate inspect` shows on the
partition's first node, or in the reason of a declined one), beside the CPU and
`partitioning="all"` medians of a `never_slower.py` JSON of the same device.

    python bench/cost_estimates.py --measured NEVER_SLOWER.json [--measured ...] \\
        [--dir DIR ...] [--estimates EST.json] [--tag NAME] [--out DIR]

--dir: .tflite folders to estimate on this machine's device (written to the results' JSON);
--estimates: estimates written by an earlier run (its JSON's rows: model, est_device_ms,
kernels, est_cpu_ms, kept), read back with the measurements' device. Writes
cost-estimates[-TAG]-<device>.json and .md.

--margins M,M,...: the margin a partition must win by, weighed on the --measured tables' own
estimates (no estimate is made here): a row's partition is kept at margin M where its device
estimate is below M x its CPU estimate; each margin counts the rows that then break the
never-slower rule, on the rows whose one partition is the whole model. Writes
cost-margins[-TAG]-<device>.json and .md.

--tunes INT8_US,MARGIN[,LAYER_US] ...: the cost model's tuned constants ($CLGPU_COST_TUNE: an int8
kernel's extra, the margin, what a layer's kernel costs over the calibration's) weighed against
the measurements: --dir's models are estimated again under each value, in this one
process (one calibration for all), and each row counts the decisions that break the
never-slower rule on each --measured table (kept where `all` is over 1.05x the CPU, declined
where it is under 1/1.05). Writes cost-tunes[-TAG]-<device>.json and .md too. Where the
device profile costs launches by kind (NVIDIA sm_90), INT8_US and LAYER_US do not enter the
estimate: weigh CLGPU_LAUNCH_US there (bench/fit_launch_costs.py fits it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import RESULTS, device_info, write_results

ESTIMATE = re.compile(
    r"estimated ([\d.]+) ms on the device \((\d+) kernels\) vs ([\d.]+) ms on the CPU"
)
# The device estimate's parts (src_cpp/delegate/cost_model.cc): the per-kernel figure (floor and
# gap), the arithmetic at the device's rate, and what the kernels' floors add to it.
PARTS = re.compile(
    r"device: ([\d.]+) us/kernel, .*?; ([\d.]+) ms arithmetic, ([\d.]+) ms more for kernel floors"
)
# Its launches by kind (cost_model.cc KernelKind): what a per-kind cost would be fitted on.
KINDS = re.compile(
    r"kernels: (\d+) gemm, (\d+) fused, (\d+) split, (\d+) small, ([a-z ]+), ([\d.]+) us gap"
    r"(?:, ([\d.]+) us invoke)?(?:, (\d+) splits as one launch, ([\d.]+) us more)?"
)
KIND_NAMES = ("gemm", "fused", "split", "small")


def kind_fields(kinds: re.Match[str]) -> dict[str, Any]:
    """A KINDS match as a row's fields: launches per kind, how they were costed, the gap, the
    cost per invoke (0 where the estimate counted none), and the split nodes counted in their
    one-launch form with what that form added to their first launches (us)."""
    counts = kinds.groups()[: len(KIND_NAMES)]
    out: dict[str, Any] = {f"est_{k}": int(v) for k, v in zip(KIND_NAMES, counts, strict=True)}
    out["est_costing"], out["est_gap_us"] = kinds[5], float(kinds[6])
    out["est_invoke_us"] = float(kinds[7] or 0)
    out["est_one_launch"] = int(kinds[8] or 0)
    out["est_one_launch_us"] = float(kinds[9] or 0)
    return out


def estimate(model: bytes) -> dict[str, Any] | None:
    """The default delegate's estimate of the model's (first) weighed partition, and whether it
    kept it; None when no partition was weighed."""
    from clgpu_delegate.report import inspect_model

    report = inspect_model(model)
    for n in report.nodes:
        for text, kept in ((n.note or "", True), (n.reason or "", False)):
            m = ESTIMATE.search(text)
            if m:
                parts = PARTS.search(text)
                kinds = KINDS.search(text)
                return {
                    "est_device_ms": float(m[1]),
                    "kernels": int(m[2]),
                    "est_cpu_ms": float(m[3]),
                    "kept": kept and n.delegated,
                    "us_per_kernel": float(parts[1]) if parts else None,
                    "est_arith_ms": float(parts[2]) if parts else None,
                    "est_floors_ms": float(parts[3]) if parts else None,
                    **(kind_fields(kinds) if kinds else {}),
                }
    return None


LIMIT = 1.05  # never_slower.py's rule


def _decisions(dirs: list[str], tune: str) -> dict[str, bool]:
    """Whether the default keeps each model's (first) weighed partition under CLGPU_COST_TUNE."""
    os.environ["CLGPU_COST_TUNE"] = tune
    try:
        out = {}
        for d in dirs:
            for p in sorted(Path(d).glob("*.tflite")):
                e = estimate(p.read_bytes())
                if e:
                    out[p.stem] = bool(e["kept"])
        return out
    finally:
        del os.environ["CLGPU_COST_TUNE"]


def _count_breaks(row: dict[str, Any], tables: list[list[dict[str, Any]]],
                  kept_of: Callable[[dict[str, Any]], bool | None]) -> dict[str, Any]:
    """Adds to `row` the rows of each table whose decision (kept_of: kept, declined, or None
    where not weighed) breaks the never-slower rule: kept where `all` is over LIMIT x the CPU,
    declined where it is under 1 / LIMIT."""
    broken: list[str] = []
    for i, table in enumerate(tables):
        names = []
        for r in table:
            kept = kept_of(r) if "cpu_ms" in r else None
            if kept is None:
                continue
            ratio = r["all_ms"] / r["cpu_ms"]
            if (kept and ratio > LIMIT) or (not kept and ratio < 1 / LIMIT):
                names.append(r["model"])
        row[f"broken_{i}"] = len(names)
        broken += names
    row["total"] = len(broken)
    row["models"] = ", ".join(sorted(set(broken)))
    print(row)
    return row


def _tune_rows(a: argparse.Namespace) -> list[dict[str, Any]]:
    tables = [json.loads(Path(f).read_text())["rows"] for f in a.measured]
    rows = []
    for tune in a.tunes:
        kept = _decisions(a.dir, tune)
        row: dict[str, Any] = {"tune": tune, "kept": sum(kept.values()), "weighed": len(kept)}
        rows.append(_count_breaks(row, tables, lambda r, k=kept: k.get(r["model"])))
    return rows


def _whole(r: dict[str, Any]) -> bool:
    """The row's one partition is the whole model, and it has the estimate of it."""
    return ("est_device_ms" in r and r.get("all_partitions") == 1
            and r["all_nodes"] >= 0.95 * r["model_nodes"])


def _margin_rows(tables: list[list[dict[str, Any]]], margins: list[float]) -> list[dict]:
    """Per margin: the rows of each table whose decision at that margin breaks the rule."""
    weighed = sum(1 for t in tables for r in t if _whole(r) and "cpu_ms" in r)
    return [
        _count_breaks(
            {"margin": m, "weighed": weighed},
            tables,
            lambda r, m=m: r["est_device_ms"] < m * r["est_cpu_ms"] if _whole(r) else None,
        )
        for m in margins
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", action="append", required=True, help="never_slower.py JSON")
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--estimates", default="", help="this script's JSON from an earlier run")
    ap.add_argument("--tunes", nargs="*", default=[], help="CLGPU_COST_TUNE values to weigh")
    ap.add_argument("--margins", default="", help="margins to weigh on the tables' estimates")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    if a.tunes and not a.dir:
        ap.error("--tunes estimates again: it needs --dir")
    if a.margins:
        tables = {f: json.loads(Path(f).read_text()) for f in a.measured}
        rows = _margin_rows([t["rows"] for t in tables.values()],
                            [float(x) for x in a.margins.split(",")])
        first = next(iter(tables.values()))["meta"]
        meta = {k: first.get(k, "") for k in ("device", "driver")}
        meta["measured"] = ", ".join(a.measured)
        cols = [("margin", "margin"), ("weighed", "rows weighed")]
        cols += [(f"broken_{i}", f"broken on table {i + 1}") for i in range(len(a.measured))]
        cols += [("total", "broken in all"), ("models", "models")]
        stem = "cost-margins" + (f"-{a.tag}" if a.tag else "")
        print(write_results(stem, meta, rows, cols, Path(a.out)))
        return 0
    measured: dict[str, dict[str, Any]] = {}
    for f in a.measured:
        for r in json.loads(Path(f).read_text())["rows"]:
            if "cpu_ms" in r:
                measured[r["model"]] = r
    est: dict[str, dict[str, Any]] = {}
    if a.estimates:
        est = {r["model"]: r for r in json.loads(Path(a.estimates).read_text())["rows"]}
    for d in a.dir:
        for p in sorted(Path(d).glob("*.tflite")):
            e = estimate(p.read_bytes())
            if e:
                est[p.stem] = {"model": p.stem, **e}
    rows = []
    for name, e in est.items():
        m = measured.get(name)
        if not m:
            continue
        row = dict(e)
        row.update(cpu_ms=m["cpu_ms"], all_ms=m["all_ms"])
        row["device_error"] = e["est_device_ms"] / m["all_ms"]
        row["cpu_error"] = e["est_cpu_ms"] / m["cpu_ms"]
        row["est_ratio"] = e["est_device_ms"] / e["est_cpu_ms"]
        row["true_ratio"] = m["all_ms"] / m["cpu_ms"]
        rows.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
    if not rows:
        print("cost_estimates: no model has both an estimate and a measurement", file=sys.stderr)
        return 1
    # Estimated here: this device; read back: the device of the measurements.
    dev = (
        device_info()
        if a.dir
        else {
            k: json.loads(Path(a.measured[0]).read_text())["meta"][k] for k in ("device", "driver")
        }
    )
    meta = {**dev, "measured": ", ".join(a.measured), "estimates": a.estimates or "this run"}
    cols = [
        ("model", "model"),
        ("kernels", "kernels"),
        ("est_device_ms", "device est ms"),
        ("us_per_kernel", "us / kernel"),
        ("est_arith_ms", "of it arithmetic ms"),
        ("est_floors_ms", "kernel floors ms"),
        ("all_ms", "all ms"),
        ("device_error", "est / all"),
        ("est_cpu_ms", "CPU est ms"),
        ("cpu_ms", "CPU ms"),
        ("cpu_error", "est / CPU"),
        ("est_ratio", "est device / CPU"),
        ("true_ratio", "all / CPU"),
    ]
    stem = "cost-estimates" + (f"-{a.tag}" if a.tag else "")
    print(write_results(stem, meta, rows, cols, Path(a.out)))
    if a.tunes:
        tune_rows = _tune_rows(a)
        tune_cols = [("tune", "INT8_US,MARGIN"), ("weighed", "models weighed"), ("kept", "kept")]
        tune_cols += [(f"broken_{i}", f"broken on table {i + 1}") for i in range(len(a.measured))]
        tune_cols += [("total", "broken in all"), ("models", "models")]
        stem = "cost-tunes" + (f"-{a.tag}" if a.tag else "")
        print(write_results(stem, meta, tune_rows, tune_cols, Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
