"""Shared pieces of the kernel benchmarks: timing one op through the delegate (the
real code path: selector, weight transforms, launches) from its OpenCL event profile,
and writing results with device, driver, date and command."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import clgpu_delegate as cd
from clgpu_delegate.runtime import make_interpreter

RESULTS = Path(__file__).resolve().parent / "results"


def add_turn_arguments(p: argparse.ArgumentParser) -> None:
    """--block (run_benchmark's block: CPU and delegate take turns in blocks of that many runs)
    and --tag (a suffix of the results' name), for the scripts that compare with the CPU."""
    p.add_argument(
        "--block",
        type=int,
        default=1,
        help="the CPU and the delegate take turns in blocks of this many runs (default: every run)",
    )
    p.add_argument("--tag", default="", help="a suffix of the results' name")


def time_model(model: bytes, feeds: list[np.ndarray], runs: int = 5, warmup: int = 1,
               **options: Any) -> dict[str, Any]:
    """Median device time of the delegated kernels (ms) and what ran."""
    d = cd.load(partitioning="all", profiling=True, **options)
    it = make_interpreter(model, [d])
    it.allocate_tensors()
    d.wait_ready()
    for det, x in zip(it.get_input_details(), feeds, strict=True):
        it.set_tensor(det["index"], x)
    for _ in range(warmup):
        it.invoke()
    per_run = []
    kernels: list[Any] = []
    for _ in range(runs):
        d.reset_profile()
        it.invoke()
        prof = d.profile()
        kernels = prof.kernels
        per_run.append(sum(k.total_ms for k in kernels))
    out = it.get_tensor(it.get_output_details()[0]["index"])
    algos = sorted({k.algorithm for k in kernels})
    del it
    d.close()
    return {"ms": float(np.median(per_run)), "algorithm": ",".join(algos),
            "kernels": len(kernels), "output": out}


def device_info() -> dict[str, Any]:
    dev = cd.select_device("auto")
    return {"device": dev.name, "driver": dev.driver_version, "type": dev.type,
            "compute_units": dev.compute_units, "clock_mhz": dev.max_clock_mhz,
            "tuning_keys": list(getattr(dev, "tuning_keys", ()))}


def run_meta(device: str | None, driver: str | None, **fields: Any) -> dict[str, Any]:
    """What every results file says first: date, the command that made it, device, driver;
    then the script's own fields."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "device": device,
        "driver": driver,
        **fields,
    }


def results_base(out: str | Path, prefix: str, tag: str, device: str | None) -> Path:
    """OUT/<prefix>[-TAG]-<device> (the folder made): the results' path less its suffix."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dev = re.sub(r"[^A-Za-z0-9]+", "_", device or "unknown").strip("_")
    return out / (f"{prefix}-" + (f"{tag}-" if tag else "") + dev)


def json_rows_per_line(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """{"meta": ..., "rows": [...]} with one row per line: a few hundred rows stay readable
    and diffable without one line per field."""
    body = ",\n".join("  " + json.dumps(r, default=float) for r in rows)
    return (f'{{"meta": {json.dumps(meta, indent=2, default=float)},\n'
            f'"rows": [\n{body}\n]}}\n')


def write_results(stem: str, meta: dict[str, Any], rows: list[dict[str, Any]],
                  columns: list[tuple[str, str]], out_dir: Path = RESULTS) -> Path:
    """bench/results/<stem>-<device>.json and .md."""
    opening = run_meta(meta.get("device"), meta.get("driver"))
    meta = {k: opening[k] for k in ("date", "command")} | dict(meta)
    base = results_base(out_dir, stem, "", meta.get("device"))
    Path(f"{base}.json").write_text(json_rows_per_line(meta, rows))
    lines = [f"# {stem} on {meta.get('device')}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "| " + " | ".join(h for _, h in columns) + " |",
              "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for key, _ in columns:
            v = r.get(key, "")
            cells.append(f"{v:.3f}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    Path(f"{base}.md").write_text("\n".join(lines) + "\n")
    return base
