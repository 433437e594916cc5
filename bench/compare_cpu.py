"""The benchmark model set on three engines: stock TFLite CPU (XNNPACK), LiteRT's own
GPU accelerator (CompiledModel, WebGPU on Vulkan; when available) and this delegate.

    python bench/compare_cpu.py [--models a,b] [--runs N] [--out bench/results]
    python bench/compare_cpu.py --set real [--dir DIR ...]

The `zoo` set (default) is the package's own generated models; the `real` set is every .tflite
under the --dir folders: by default the public corpus (tests/public_models.py)
and the Keras models bench/keras_models.py converts (needs TensorFlow). For real models the
table also gives what `partitioning="all"` would claim, the coverage the default starts from.
Writes bench/results/models[-real]-<device>.json and .md (device, driver, date, command) and a
PNG plot. Times are medians of synchronous inferences including input upload and output
read-back, batch 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_turn_arguments, results_base, run_meta

import clgpu_delegate
from clgpu_delegate.bench import run_benchmark
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter

DEFAULT_MODELS = [
    "lenet5",
    "mobilenet_v1",
    "mobilenet_v2",
    "inception_v1",
    "inception_v3",
    "resnet50",
    "alexnet",
    "pynet",
]


REAL_DIRS = [
    Path("~/.cache/clgpu_delegate/public-models").expanduser(),
    Path("~/.cache/clgpu_delegate/keras-models").expanduser(),
]


def coverage_all(path: Path) -> dict[str, Any]:
    """Nodes and partitions under partitioning="all": what the delegate can claim at all."""
    try:
        d = clgpu_delegate.load(partitioning="all")
        interp = make_interpreter(str(path), [d])
        interp.allocate_tensors()
        dec = d.decisions()
        return {
            "claimed": sum(1 for x in dec if x.delegated),
            "nodes": len(dec),
            "partitions": len(d.partitions()),
            "cpu_ops": sorted({x.op_name for x in dec if not x.delegated}),
        }
    except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
        return {"error": f"{type(e).__name__}: {e}"}


def litert_gpu(model_path: Path, runs: int) -> dict[str, Any]:
    """Median time of LiteRT's CompiledModel with the GPU accelerator, or the reason
    it could not run."""
    try:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    except ImportError as e:
        return {"error": f"ai_edge_litert.compiled_model not available: {e}"}
    try:
        t0 = time.perf_counter()
        cm = CompiledModel.from_file(
            str(model_path), hardware_accel=HardwareAccelerator.GPU | HardwareAccelerator.CPU
        )
        inputs = cm.create_input_buffers(0)
        outputs = cm.create_output_buffers(0)
        init_ms = (time.perf_counter() - t0) * 1e3
        sig = cm.get_signature_by_index(0)
        in_det = cm.get_input_tensor_details(sig.get("key", "") if isinstance(sig, dict) else "")
        rng = np.random.default_rng(0)
        feeds = []
        for name in in_det:
            shape = in_det[name]["shape"]
            feeds.append(rng.standard_normal(shape).astype(np.float32))
        out_det = cm.get_output_tensor_details(sig.get("key", "") if isinstance(sig, dict) else "")
        out_sizes = [int(np.prod(out_det[n]["shape"])) for n in out_det]

        def once() -> float:
            t = time.perf_counter()
            for b, x in zip(inputs, feeds, strict=True):
                b.write(x)
            cm.run_by_index(0, inputs, outputs)
            for b, n in zip(outputs, out_sizes, strict=True):
                b.read(n, np.float32)
            return (time.perf_counter() - t) * 1e3

        first = once()
        times = [once() for _ in range(runs)]
        return {
            "init_ms": init_ms,
            "first_ms": first,
            "median_ms": statistics.median(times),
            "min_ms": min(times),
            "fully_accelerated": bool(cm.is_fully_accelerated()),
        }
    except Exception as e:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=["zoo", "real"], default="zoo")
    ap.add_argument("--models", default=None, help="zoo names (default: the zoo set)")
    ap.add_argument(
        "--dir", action="append", default=None, help="--set real: folders of .tflite files"
    )
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument(
        "--min-seconds",
        type=float,
        default=1.0,
        help="alternate CPU and delegate runs past --runs until this long (tiny models)",
    )
    add_turn_arguments(ap)
    ap.add_argument("--pynet-size", type=int, default=512)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--partitioning", default="cost")
    ap.add_argument("--no-litert-gpu", action="store_true")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also profile each delegated model: kernel time per invoke against the median",
    )
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args(argv)
    rows = []
    device = None
    if args.set == "real":
        dirs = [Path(d).expanduser() for d in args.dir] if args.dir else REAL_DIRS
        models = [(p.stem, p) for d in dirs if d.is_dir() for p in sorted(d.glob("*.tflite"))]
        if not models:
            ap.error(f"no .tflite files under {', '.join(map(str, dirs))}")
    else:
        names = [m for m in (args.models or ",".join(DEFAULT_MODELS)).split(",") if m]
        models = [
            (
                n + (f"-{args.pynet_size}" if n == "pynet" else ""),
                zoo.path(n, **({"size": args.pynet_size} if n == "pynet" else {})),
            )
            for n in names
        ]
    for name, path in models:
        try:
            rep = run_benchmark(
                str(path),
                runs=args.runs,
                min_seconds=args.min_seconds,
                precision=args.precision,
                partitioning=args.partitioning,
                progress=False,
                profile=args.profile,
                block=args.block,
            )
        except Exception as e:  # noqa: BLE001 - one model that fails does not end the run
            print(f"{name:<16} failed: {type(e).__name__}: {e}", flush=True)
            rows.append({"model": name, "error": f"{type(e).__name__}: {e}"})
            continue
        device = device or rep
        cpu, dlg = rep["results"]
        row = {
            "model": name,
            "cpu": cpu,
            "delegate": dlg,
            "memory": rep.get("memory"),
        }
        if rep.get("kernel_share_of_invoke"):
            kernels = sum(p["kernels_per_invoke"] for p in rep["profile"]["partitions"])
            row["profile"] = {
                "kernels_per_invoke": kernels,
                "kernel_ms_per_invoke": rep["kernel_ms_per_invoke"],
                "kernel_ms_per_invoke_as_timed": rep["kernel_ms_per_invoke_as_timed"],
                "event_overhead_us": rep["event_overhead_us"],
                "kernel_share_of_invoke": rep["kernel_share_of_invoke"],
            }
        if args.set == "real":
            row["all"] = coverage_all(path)
        if not args.no_litert_gpu:
            row["litert_gpu"] = litert_gpu(path, cpu["runs"])
        rows.append(row)
        g = row.get("litert_gpu", {})
        print(
            f"{row['model']:<16} cpu {cpu['median_ms']:9.3f} ms   litert-gpu "
            f"{g.get('median_ms', float('nan')):9.3f} ms   delegate {dlg['median_ms']:9.3f} ms "
            f"({dlg['delegated_nodes']}/{dlg['total_nodes']} nodes, {dlg['partitions']} parts, "
            f"rel diff {dlg['max_rel_diff']:.1e})",
            flush=True,
        )
    meta = run_meta(
        device["device"] if device else None, device["driver"] if device else None,
        cpu_threads=os.cpu_count(), precision=args.precision, partitioning=args.partitioning,
        runs=args.runs, min_seconds=args.min_seconds, block=args.block,
    )
    failed = [r for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    prefix = "models-real" if args.set == "real" else "models"
    base = results_base(args.out, prefix, args.tag, meta["device"])
    Path(f"{base}.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "failed": failed}, indent=2)
    )
    md = [
        f"# Benchmark models on {meta['device']}",
        "",
        f"driver {meta['driver']}, {meta['date']}, CPU threads {meta['cpu_threads']}, "
        f"precision {meta['precision']}, partitioning {meta['partitioning']}, "
        f"median of at least {meta['runs']} alternating runs"
        + (f" (in turns of {args.block})" if args.block > 1 else "")
        + f" and {meta['min_seconds']} s per model (runs per model in the JSON)",
        "",
        f"command: `{meta['command']}`",
        "",
        "| model | CPU (XNNPACK) ms | LiteRT GPU ms | delegate ms | speed-up vs CPU | "
        "delegated nodes | partitions | init ms (delegate) | of it, driver setup ms | "
        "init ms (LiteRT GPU) | max rel diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c, d, g = r["cpu"], r["delegate"], r.get("litert_gpu", {})
        gm = f"{g['median_ms']:.3f}" if "median_ms" in g else ("n/a" if not g else "failed")
        gi = f"{g['init_ms']:.0f}" if "init_ms" in g else "-"
        md.append(
            f"| {r['model']} | {c['median_ms']:.3f} | {gm} | {d['median_ms']:.3f} | "
            f"{c['median_ms'] / d['median_ms']:.2f}x | {d['delegated_nodes']}/"
            f"{d['total_nodes']} | {d['partitions']} | {d['init_ms']:.0f} | "
            f"{d.get('driver_setup_ms', 0):.0f} | {gi} | {d['max_rel_diff']:.1e} |"
        )
    errs = [
        f"- {r['model']}: LiteRT GPU {r['litert_gpu']['error']}"
        for r in rows
        if "error" in r.get("litert_gpu", {})
    ]
    errs += [f"- {r['model']}: the benchmark failed: {r['error']}" for r in failed]
    covered = [r for r in rows if "all" in r]
    if covered:
        md += [
            "",
            '`partitioning="all"`: the nodes the delegate can claim, the partitions they make, '
            "and the ops it leaves to the CPU.",
            "",
            "| model | claimable nodes | partitions | CPU ops |",
            "|---|---|---|---|",
        ]
        for r in covered:
            a = r["all"]
            if "error" in a:
                md.append(f"| {r['model']} | failed: {a['error']} | | |")
            else:
                md.append(
                    f"| {r['model']} | {a['claimed']}/{a['nodes']} | {a['partitions']} | "
                    f"{', '.join(a['cpu_ops'])} |"
                )
    if errs:
        md += ["", *errs]
    profiled = [r for r in rows if "profile" in r]
    if profiled:
        md += [
            "",
            "Profile (`--profile`, a second delegate with profiling events, after the timed "
            "runs): kernel time per invoke from the events, less what each event adds on this "
            "device (measured when the delegate loads), against the delegate's median above. "
            "The rest: uploads, downloads, CPU ops, and launch gaps where the host's enqueue "
            "is slower than the kernels.",
            "",
            "| model | kernels per invoke | event overhead us | kernel ms (as timed) | "
            "kernel ms | of the median invoke |",
            "|---|---|---|---|---|---|",
        ]
        for r in profiled:
            p = r["profile"]
            md.append(
                f"| {r['model']} | {p['kernels_per_invoke']} | {p['event_overhead_us']:.2f} | "
                f"{p['kernel_ms_per_invoke_as_timed']:.3f} | {p['kernel_ms_per_invoke']:.3f} | "
                f"{100 * p['kernel_share_of_invoke']:.0f}% |"
            )
    Path(f"{base}.md").write_text("\n".join(md) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.5))
        x = np.arange(len(rows))
        w = 0.27
        ax.bar(x - w, [r["cpu"]["median_ms"] for r in rows], w, label="TFLite CPU")
        ax.bar(
            x, [r.get("litert_gpu", {}).get("median_ms", 0) for r in rows], w, label="LiteRT GPU"
        )
        ax.bar(x + w, [r["delegate"]["median_ms"] for r in rows], w, label="clgpu delegate")
        ax.set_xticks(x, [r["model"] for r in rows], rotation=20)
        ax.set_yscale("log")
        ax.set_ylabel("median ms")
        ax.legend()
        ax.set_title(meta["device"] or "")
        fig.tight_layout()
        fig.savefig(f"{base}.png", dpi=110)
    except ImportError:
        pass
    print(f"wrote {base}.json/.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
