"""What one kernel launch of each kind costs an invoke on a device (issue #42), fitted on the
wall times of real models: the per-kind costs a device profile carries
(src_cpp/cl/device_profile.h `launch_us`) in place of the calibration's one figure.

    python bench/fit_launch_costs.py --measured NEVER_SLOWER.json [--measured ...] \\
        [--kinds-from NEVER_SLOWER.json ...] [--invoke] [--tag NAME] [--out DIR]

Each never_slower.py row carries the default's estimate with its launches by kind (gemm,
fused, split, small). Of the rows whose one partition runs the whole model and whose device
time is set by launches, not arithmetic, in the band where the decision matters (`all` within
3x of the CPU either way), the fit finds the per-kind costs that make the estimate's arithmetic
and transfers plus the launches' costs meet the `all` time (least squares of the relative
error). --kinds-from: rows of the same build and device without the kinds (an older harness)
take them from this table's row of the same model and kernel count. Writes
launch-costs[-TAG]-<device>.json and .md: the fit, its leave-one-model-out error, and the error
of the estimates as they were made.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, write_results
from cost_estimates import KIND_NAMES

KINDS = [f"est_{k}" for k in KIND_NAMES]
BAND = 3.0  # all / CPU within this factor either way: where a decision can go wrong
ARITH_SHARE = 0.3  # the estimate's arithmetic below this share of it: launch-bound
# Rows of the harness before the estimate named its gap: the calibration's 0 plus half the
# layer extras, the one costing it had then.
OLD_GAP_US = 1.0


def _with_kinds(row: dict[str, Any], source: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row with its kinds and the estimate's launch part, or None without them."""
    if "est_gemm" in row and "est_floors_ms" in row:
        return {"est_gap_us": OLD_GAP_US, **row}
    if not source or source.get("est_kernels") != row.get("est_kernels"):
        return None
    out = dict(row)
    out.update({k: source[k] for k in KINDS})
    out["est_gap_us"] = source.get("est_gap_us", OLD_GAP_US)
    # The source's kernels' floors less its arithmetic under them, at this row's figure.
    k = source["est_kernels"]
    under = k * (source["est_us_per_kernel"] - out["est_gap_us"]) / 1e3 - source["est_floors_ms"]
    out["est_floors_ms"] = k * (row["est_us_per_kernel"] - out["est_gap_us"]) / 1e3 - under
    out["est_arith_ms"] = source["est_arith_ms"]
    return out


def _rest_ms(r: dict[str, Any]) -> float:
    """The estimate less its launches and its per-invoke cost: arithmetic, transfers, the sync,
    and what the split nodes counted in their one-launch form add to their first launches (the
    device profile's split_k_last figures, not a kind's cost to fit)."""
    launches = r["est_floors_ms"] + r["est_kernels"] * r["est_gap_us"] / 1e3
    extra = r.get("est_invoke_us", 0.0) - r.get("est_one_launch_us", 0.0)
    return r["est_device_ms"] - launches - extra / 1e3


def _predict(r: dict[str, Any], costs: np.ndarray) -> float:
    """costs: one per kind, then (with --invoke) the per-invoke cost."""
    per_kind = sum(r[k] * c for k, c in zip(KINDS, costs[: len(KINDS)], strict=True))
    return _rest_ms(r) + (per_kind + sum(costs[len(KINDS):])) / 1e3


def _fit(rows: list[dict[str, Any]], invoke: bool = False) -> np.ndarray:
    a = np.array([[r[k] / 1e3 / r["all_ms"] for k in KINDS] + ([1e-3 / r["all_ms"]] * invoke)
                  for r in rows])
    b = np.array([(r["all_ms"] - _rest_ms(r)) / r["all_ms"] for r in rows])
    costs, *_ = np.linalg.lstsq(a, b, rcond=None)
    return costs


def _rms(errors: list[float]) -> float:
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", action="append", required=True, help="never_slower.py JSON")
    ap.add_argument(
        "--kinds-from", action="append", default=[], help="a table of the same build with kinds"
    )
    ap.add_argument("--profile", default="", help="the costs the profile has now: G,F,S,M[,I]")
    ap.add_argument("--invoke", action="store_true", help="fit a cost per invoke too")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    source: dict[str, dict[str, Any]] = {}
    for f in a.kinds_from:
        source.update(
            {r["model"]: r for r in json.loads(Path(f).read_text())["rows"] if "est_gemm" in r}
        )
    rows: list[dict[str, Any]] = []
    meta_in: dict[str, Any] = {}
    for f in a.measured:
        table = json.loads(Path(f).read_text())
        meta_in = meta_in or table["meta"]
        for r in table["rows"]:
            if "est_device_ms" not in r or r.get("all_partitions") != 1:
                continue
            if r["all_nodes"] < 0.95 * r["model_nodes"]:
                continue
            if not 1 / BAND <= r["all_ms"] / r["cpu_ms"] <= BAND:
                continue
            full = _with_kinds(r, source.get(r["model"]))
            if full and full["est_arith_ms"] < ARITH_SHARE * full["est_device_ms"]:
                rows.append({**full, "table": Path(f).stem})
    if len(rows) < 2 * len(KINDS):
        print(f"fit_launch_costs: {len(rows)} rows, too few to fit {len(KINDS)} costs")
        return 1
    costs = _fit(rows, a.invoke)
    rounded = np.round(costs * 2) / 2
    loo: list[float] = []
    for model in sorted({r["model"] for r in rows}):
        c = _fit([r for r in rows if r["model"] != model], a.invoke)
        loo += [math.log(_predict(r, c) / r["all_ms"]) for r in rows if r["model"] == model]
    names = [*KIND_NAMES, "invoke"] if a.invoke else KIND_NAMES
    summary = {
        "fitted_us": dict(zip(names, costs.round(2).tolist(), strict=True)),
        "rounded_us": dict(zip(names, rounded.tolist(), strict=True)),
        "rms_log_as_estimated": _rms([math.log(r["est_device_ms"] / r["all_ms"]) for r in rows]),
        "rms_log_fitted": _rms([math.log(_predict(r, costs) / r["all_ms"]) for r in rows]),
        "rms_log_rounded": _rms([math.log(_predict(r, rounded) / r["all_ms"]) for r in rows]),
        "rms_log_leave_one_model_out": _rms(loo),
    }
    profile = np.array([float(x) for x in a.profile.split(",")]) if a.profile else None
    if profile is not None:
        errors = [math.log(_predict(r, profile) / r["all_ms"]) for r in rows]
        summary["rms_log_profile"] = _rms(errors)
    print(json.dumps(summary, indent=1))
    out_rows = []
    for r in rows:
        keep = ("table", "model", "cpu_ms", "all_ms", "est_device_ms", "est_kernels")
        o = {k: r[k] for k in (*keep, "est_arith_ms", "est_floors_ms", "est_gap_us")}
        o.update({k: r[k] for k in KINDS})
        o["as_estimated"] = r["est_device_ms"] / r["all_ms"]
        o["rounded"] = _predict(r, rounded) / r["all_ms"]
        if profile is not None:
            o["profile"] = _predict(r, profile) / r["all_ms"]
        out_rows.append(o)
    meta = {
        "device": meta_in.get("device", "unknown"),
        "driver": meta_in.get("driver", ""),
        "measured": ", ".join(a.measured),
        "kinds_from": ", ".join(a.kinds_from) or "the tables themselves",
        "rows": len(rows),
        **{k: json.dumps(v) if isinstance(v, dict) else round(v, 4) for k, v in summary.items()},
    }
    cols = [("table", "table"), ("model", "model"), ("cpu_ms", "CPU ms"), ("all_ms", "all ms")]
    cols += [(k, k[4:]) for k in KINDS]
    cols += [("as_estimated", "estimate / all"), ("rounded", "fitted (rounded) / all")]
    if profile is not None:
        cols.append(("profile", "profile / all"))
    stem = "launch-costs" + (f"-{a.tag}" if a.tag else "")
    print(write_results(stem, meta, out_rows, cols, Path(a.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
