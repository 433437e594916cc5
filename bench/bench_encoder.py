"""The Keras transformer encoder (bench/keras_models.py: 4 layers, seq 128, dim 256, float32 and
fp16-weight) on stock TFLite CPU (XNNPACK, all cores) against the delegate, default options,
without split-K (gemm_splits=1) and without its rewrites (fuse_add=false): median invoke,
claimed nodes and partitions, device commands per invoke and kernel time from a profiled run,
and the output difference.

    python bench/bench_encoder.py [--dir DIR] [--runs N] [--min-seconds S]

Writes bench/results/encoder-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clgpu_delegate.bench import run_benchmark

DEFAULT_DIR = Path("~/.cache/clgpu_delegate/keras-models").expanduser()
MODELS = ["keras_encoder_4x128x256", "keras_encoder_4x128x256_fp16"]
# Default options; without split-K (on a GPU the encoder's GEMMs, 128 rows, split K in four to
# sixteen: one more launch each, which may cost more than it saves at this size); without the
# rewrites.
VARIANTS = {"default": {}, "no split-K": {"gemm_splits": 1}, "no rewrites": {"fuse_add": False}}


def row(name: str, path: str, args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    rep = run_benchmark(path, runs=args.runs, min_seconds=args.min_seconds, progress=False,
                        profile=True, **options)
    cpu, dlg = rep["results"]
    prof = rep.get("profile") or {}
    return {
        "model": name,
        "variant": ",".join(f"{k}={v}" for k, v in options.items()) or "default",
        "cpu_ms": cpu["median_ms"],
        "delegate_ms": dlg["median_ms"],
        "speedup": rep["speedup"],
        "nodes": f"{dlg['delegated_nodes']}/{dlg['total_nodes']}",
        "partitions": dlg.get("partitions"),
        "commands_per_invoke": sum(p["kernels_per_invoke"] for p in prof.get("partitions", [])),
        "kernel_ms_per_invoke": rep.get("kernel_ms_per_invoke"),
        "max_abs_diff": dlg["max_abs_diff"],
        "max_rel_diff": dlg["max_rel_diff"],
        "runs": dlg["runs"],
        "device": rep["device"],
        "driver": rep["driver"],
        "cpu_threads": rep["cpu_threads"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--min-seconds", type=float, default=3.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args(argv)
    rows = []
    for name in MODELS:
        path = Path(args.dir).expanduser() / f"{name}.tflite"
        if not path.exists():
            print(f"{path} is missing: python bench/keras_models.py --models encoder_4x128x256 "
                  "--fp16", file=sys.stderr)
            return 2
        for options in VARIANTS.values():
            r = row(name, str(path), args, options)
            rows.append(r)
            print(f"{name:<30} {r['variant']:<16} cpu {r['cpu_ms']:8.3f} ms  delegate "
                  f"{r['delegate_ms']:8.3f} ms  x{r['speedup']:.2f}  {r['nodes']} nodes in "
                  f"{r['partitions']}  {r['commands_per_invoke']} commands  max abs "
                  f"{r['max_abs_diff']:.2g}", flush=True)
    meta = {
        "device": rows[0]["device"],
        "driver": rows[0]["driver"],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "cpu_threads": rows[0]["cpu_threads"],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "encoder-" + re.sub(r"[^A-Za-z0-9]+", "_", meta["device"] or "unknown").strip("_")
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    md = [
        f"# Keras transformer encoder on {meta['device']}",
        "",
        f"driver {meta['driver']}, {meta['date']}, CPU threads {meta['cpu_threads']}, batch 1, "
        f"`{meta['command']}`. Median invoke including set/get; CPU = stock "
        "TFLite (XNNPACK); commands = kernels and copies one invoke enqueues (profiled run).",
        "",
        "| model | delegate options | CPU ms | delegate ms | speedup | nodes | partitions | "
        "commands | kernel ms | max abs diff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['model']} | {r['variant']} | {r['cpu_ms']:.3f} | {r['delegate_ms']:.3f} | "
            f"{r['speedup']:.2f} | {r['nodes']} | {r['partitions']} | "
            f"{r['commands_per_invoke']} | {r['kernel_ms_per_invoke'] or 0:.3f} | "
            f"{r['max_abs_diff']:.2g} |"
        )
    (out / f"{stem}.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
