"""A/B of steady-state invokes from bench_host_bound.py runs: one build's runs ("base") against
another's ("new"), alternated in the same minutes on the same machine. Per model: each fresh
process's median invoke, the median over each side's processes and its change, the fastest
process of each side and its change, and the spread of each side (max / min - 1 over its
processes), which says what change the medians can resolve. A host-bound model's processes fall
into a fast and a slow mode in any build (H200: up to 55% apart); the fastest process compares
the same mode on both sides.

    python bench/ab_steady.py --base b1.json,b2.json --new n1.json,n2.json --tag NAME
        [--note TEXT] [--out bench/results]

Writes ab-steady[-TAG]-<device>.json and .md (device, driver and the runs' commands from the
inputs, date).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def per_process(paths: list[str]) -> tuple[dict[str, list[float]], list[dict[str, Any]]]:
    medians: dict[str, list[float]] = {}
    metas = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        metas.append(data["meta"])
        for row in data["rows"]:
            if row.get("median_ms") is not None:
                medians.setdefault(row["model"], []).append(float(row["median_ms"]))
    return medians, metas


def spread(v: list[float]) -> float:
    return max(v) / min(v) - 1 if v and min(v) > 0 else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="bench_host_bound.py JSON files, comma-separated")
    ap.add_argument("--new", required=True, help="the same for the other build")
    ap.add_argument("--tag", default="")
    ap.add_argument("--note", default="", help="what base and new are")
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args(argv)
    base, base_meta = per_process(a.base.split(","))
    new, new_meta = per_process(a.new.split(","))
    rows = []
    for model in base:
        if model not in new:
            continue
        b, n = statistics.median(base[model]), statistics.median(new[model])
        rows.append(
            {
                "model": model,
                "base_ms": [round(x, 4) for x in base[model]],
                "new_ms": [round(x, 4) for x in new[model]],
                "base_median_ms": round(b, 4),
                "new_median_ms": round(n, 4),
                "change_pct": round(100 * (n / b - 1), 2),
                "base_best_ms": round(min(base[model]), 4),
                "new_best_ms": round(min(new[model]), 4),
                "best_change_pct": round(100 * (min(new[model]) / min(base[model]) - 1), 2),
                "base_spread_pct": round(100 * spread(base[model]), 1),
                "new_spread_pct": round(100 * spread(new[model]), 1),
            }
        )
    if not rows:
        print("no model in both sides", file=sys.stderr)
        return 1
    m = base_meta[0]
    device = str(m.get("device", "unknown"))
    meta = {
        "device": device,
        "driver": m.get("driver"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": a.note,
        "base_commands": [x.get("command") for x in base_meta],
        "new_commands": [x.get("command") for x in new_meta],
        "command": "python bench/ab_steady.py " + " ".join(argv or sys.argv[1:]),
    }
    name = "ab-steady" + (f"-{a.tag}" if a.tag else "") + "-" + device.replace(" ", "_")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# {name}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if not isinstance(v, list)]
    lines += [f"- base run: `{c}`" for c in meta["base_commands"]]
    lines += [f"- new run: `{c}`" for c in meta["new_commands"]]
    lines += [
        "",
        "Per process: the median invoke over its windows; a side's figure is the median over its",
        "processes; spread: max / min - 1 over one side's processes.",
        "",
        "| model | base ms (per process) | new ms (per process) | base | new | change | "
        "base best | new best | best change | base spread | new spread |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {' '.join(f'{x:.3f}' for x in r['base_ms'])} | "
            f"{' '.join(f'{x:.3f}' for x in r['new_ms'])} | {r['base_median_ms']:.3f} | "
            f"{r['new_median_ms']:.3f} | {r['change_pct']:+.1f}% | {r['base_best_ms']:.3f} | "
            f"{r['new_best_ms']:.3f} | {r['best_change_pct']:+.1f}% | "
            f"{r['base_spread_pct']:.1f}% | {r['new_spread_pct']:.1f}% |"
        )
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    for r in rows:
        print(r)
    print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
