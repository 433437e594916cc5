"""Where the default's keep-or-decline decisions go wrong on never-slower tables, and whether a
refit of the device estimate would have decided better (issue #42, acceptance point 3).

    python bench/decision_errors.py \\
        --measured 'results/never-slower-heldout-seeds*-NVIDIA_H200.json' [--measured ...] \\
        [--tag NAME] [--out DIR]

Rows: a model whose `all` plan is one partition of the whole model, with the default's estimate
of that partition (never_slower.py's est_* fields). A decision is wrong where the estimate keeps
the partition (device estimate below the CPU estimate) and `all` ran over 1.05x the CPU, or
declines it and `all` ran under 1 / 1.05 of it. Each variant of the device estimate is fitted
leaving out the table it is scored on (leave one table, one machine, out):

- `as made`: the estimate as the table recorded it;
- `+ arithmetic`: plus a multiple of its arithmetic (the estimate counts a kernel's arithmetic
  under its launch floor, max(); the device may run it after the launch, a sum);
- `+ arithmetic, kinds`: that, with the launch costs by kind refitted too.

Also the spread of rows whose default and `all` plans are the same (one partition, the same
nodes): what timing alone does to a row. Writes decision-errors[-TAG]-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, json_rows_per_line

LIMIT = 1.05  # never_slower.py's rule
KINDS = ("est_gemm", "est_fused", "est_split", "est_small")
VARIANTS: dict[str, tuple[str, ...]] = {
    "as made": (),
    "+ arithmetic": ("arith",),
    "+ arithmetic, kinds": ("arith", *KINDS, "one"),
}


def _whole(row: dict[str, Any]) -> bool:
    return bool(row.get("est_device_ms")) and "est_gemm" in row and (
        row.get("all_partitions") == 1 and row.get("all_nodes") == row.get("model_nodes"))


def _features(row: dict[str, Any], names: tuple[str, ...]) -> list[float]:
    f = {"arith": row.get("est_arith_ms", 0.0) * 1e3, "one": 1.0}
    f.update({k: float(row[k]) for k in KINDS})
    return [f[n] for n in names]


def _fit(rows: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    """Corrections to the estimate (us per feature), least squares of the relative error."""
    scale = np.array([[r["all_ms"] * 1e3] for r in rows])
    a = np.array([_features(r, names) for r in rows]) / scale
    b = np.array([(r["all_ms"] - r["est_device_ms"]) / r["all_ms"] for r in rows])
    return np.linalg.lstsq(a, b, rcond=None)[0]


def _wrong(row: dict[str, Any], device_ms: float) -> bool:
    keep = device_ms < row["est_cpu_ms"]
    ratio = row["all_ms"] / row["cpu_ms"]
    return (keep and ratio > LIMIT) or (not keep and ratio < 1 / LIMIT)


def score(tables: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for variant, names in VARIANTS.items():
        logs, wrong = [], []
        for name, rows in tables.items():
            rest = [r for t, rs in tables.items() if t != name for r in rs]
            c = _fit(rest, names) if names else np.zeros(0)
            for r in rows:
                device_ms = r["est_device_ms"] + float(np.dot(_features(r, names), c)) / 1e3
                logs.append(math.log(device_ms / r["all_ms"]))
                if _wrong(r, device_ms):
                    wrong.append(r["model"])
        full = _fit([r for rs in tables.values() for r in rs], names) if names else []
        out.append({
            "variant": variant, "rows": len(logs),
            "rms_log_device": round(math.sqrt(sum(x * x for x in logs) / len(logs)), 3),
            "wrong": len(wrong), "wrong_models": ", ".join(wrong),
            "fit_us": ", ".join(f"{n} {v:.2f}" for n, v in zip(names, full, strict=True)),
        })
        print(out[-1])
    return out


def same_plan_spread(tables: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    ratios = sorted(r["default_ms"] / r["all_ms"] for rs in tables.values() for r in rs
                    if r.get("all_nodes") and r.get("default_nodes") == r.get("all_nodes")
                    and r.get("default_partitions") == r.get("all_partitions"))
    if len(ratios) < 20:
        return {}
    q = statistics.quantiles(ratios, n=20)
    return {"same_plan_rows": len(ratios), "same_plan_p5": round(q[0], 3),
            "same_plan_median": round(statistics.median(ratios), 3),
            "same_plan_p95": round(q[-1], 3),
            "same_plan_over": sum(x > LIMIT for x in ratios)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", action="append", required=True,
                    help="never_slower.py JSON tables (globs), one machine each")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    paths = sorted({p for g in a.measured for p in glob.glob(g)})
    tables, all_rows, device = {}, {}, "unknown"
    for p in paths:
        d = json.loads(Path(p).read_text())
        device = d["meta"].get("device", device)
        all_rows[Path(p).stem] = d["rows"]
        rows = [r for r in d["rows"] if _whole(r)]
        if rows:
            tables[Path(p).stem] = rows
    if len(tables) < 2:
        ap.error("needs at least two tables with estimates (one is left out at a time)")
    variants = score(tables)
    meta = {"device": device, "tables": len(tables),
            "measured": ", ".join(Path(p).name for p in paths), **same_plan_spread(all_rows)}
    stem = "decision-errors" + (f"-{a.tag}" if a.tag else "")
    dev = "".join(c if c.isalnum() else "_" for c in device).strip("_")
    base = Path(a.out) / f"{stem}-{dev}"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".json").write_text(json_rows_per_line(meta, variants))
    lines = [f"# {stem} on {device}", ""] + [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "| variant | rows | rms log (device estimate / all) | wrong decisions | fit (us) "
              "| models decided wrong |", "|---|---|---|---|---|---|"]
    lines += [f"| {v['variant']} | {v['rows']} | {v['rms_log_device']} | {v['wrong']} | "
              f"{v['fit_us']} | {v['wrong_models']} |" for v in variants]
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(base.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
