"""Writes a tuner's winner into the kernels' tuning table, src_cpp/ops/tuning.json, which the
build compiles in (cmake/ClgpuTuning.cmake): the table is the tuners' output, never a hand copy.

    python bench/tune_gemm.py --json gemm.json
    python bench/tuning_table.py gemm.json --entry gemm_big [--key nvidia/sm_90]
    python bench/tune_direct_blocked.py --json blocked.json
    python bench/tuning_table.py blocked.json --entry direct_blocked

The tuner's JSON says which table: tune_gemm.py's rows are GEMM tiles (TM,TN,TK,WM,WN,DBUF,TMAP
and an LPAD option), tune_direct_blocked.py's blockings per shape (PX,OCB,WGX,WGY; the winner is
the blocking with the best geometric mean over the shapes every blocking ran). --key defaults to
the tuned device's "<vendor>/<architecture>" (its profile's second key; the vendor alone when the
architecture is unknown). Prints the row it wrote; --dry-run only prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent.parent / "src_cpp" / "ops" / "tuning.json"


def gemm_winner(rows: list[dict[str, Any]]) -> list[int]:
    ok = [r for r in rows if "tflops" in r and r.get("max_rel_err", 1) < 1e-4]
    if not ok:
        raise SystemExit("no configuration of the tuner's JSON ran correctly")
    best = max(ok, key=lambda r: r["tflops"])
    values = [int(v) for v in best["config"].split(",")]
    lpad = re.search(r"-DLPAD=(\d+)", best.get("options", ""))
    return values + [int(lpad.group(1))] if lpad else values


def blocked_winner(rows: list[dict[str, Any]]) -> list[int]:
    by_config: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.get("ok"):
            by_config.setdefault(r["config"], {})[r["shape"]] = r["tflops"]
    shapes = {r["shape"] for r in rows}
    full = {c: t for c, t in by_config.items() if set(t) == shapes}
    if not full:
        raise SystemExit("no blocking of the tuner's JSON ran every shape correctly")

    def geomean(t: dict[str, float]) -> float:
        return math.exp(sum(math.log(v) for v in t.values()) / len(t))

    return [int(v) for v in max(full, key=lambda c: geomean(full[c])).split(",")]


def default_key(device: dict[str, Any]) -> str:
    keys = device.get("tuning_keys") or []
    if len(keys) >= 3:  # "<vendor>/<arch>/<name>", "<vendor>/<arch>", ...
        return keys[1]
    if keys and keys[0] not in ("gpu", "cpu"):
        return keys[0]
    raise SystemExit("the tuner's JSON names no device profile key: pass --key")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a tuner's --json output")
    ap.add_argument("--entry", required=True, help="the table entry, e.g. gemm_big, igemm")
    ap.add_argument("--key", default=None, help="the device key (default: the tuned device's)")
    ap.add_argument("--table", default=str(TABLE))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    results = json.loads(Path(args.results).read_text())
    rows = results["rows"]
    blocked = bool(rows) and "shape" in rows[0]
    table = "direct_blocked" if blocked else "gemm"
    values = blocked_winner(rows) if blocked else gemm_winner(rows)
    key = args.key or default_key(results.get("device", {}))
    print(f"{table}/{key}/{args.entry}: {values}")
    if args.dry_run:
        return 0
    path = Path(args.table)
    doc = json.loads(path.read_text())
    doc["tables"][table]["rows"].setdefault(key, {})[args.entry] = values
    text = json.dumps(doc, indent=2)
    # One row per line, as the file is kept.
    text = re.sub(
        r"\[\s+([-\d,\s]+?)\s+\]",
        lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
        text,
    )
    text = re.sub(
        r'"fields": \[\s+([^\]]+?)\s+\]',
        lambda m: '"fields": [' + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
        text,
    )
    path.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
