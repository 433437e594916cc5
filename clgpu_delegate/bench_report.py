"""The benchmark's report as text, PNG and JSON, with what a reader needs to trust it: how
much the delegate ran, and whether the medians are measurements or noise."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import require_extra

if TYPE_CHECKING:
    from .bench_result import BenchReport, ResultSummary

# Fewer timed runs than this and a median is one or two samples: any hiccup is the result.
MIN_RUNS = 5
# A p90 this many times the fastest run: the run times spread so widely (other load, clock
# changes, a cold cache) that the median moves with each rerun.
SPREAD_LIMIT = 1.5


def timing_warnings(results: Sequence[ResultSummary]) -> list[str]:
    """Why the medians of `results` may not be trusted; empty when nothing stands out."""
    out = []
    runs = min((r["runs"] for r in results), default=0)
    if runs < MIN_RUNS:
        out.append(
            f"only {runs} timed run(s) per row: a median of so few is not a measurement "
            "(use --runs 20 or more)"
        )
    for r in results:
        if r["runs"] and r["p90_ms"] > SPREAD_LIMIT * r["min_ms"]:
            out.append(
                f"{r['name']} run times spread widely (min {r['min_ms']:.3f}, median "
                f"{r['median_ms']:.3f}, p90 {r['p90_ms']:.3f} ms): its median is unreliable "
                "(run on a quiet machine, or use more --runs)"
            )
    return out


def _table(report: BenchReport) -> list[str]:
    cols = ["init ms", "first ms", "median ms", "p90 ms", "min ms", "RSS MB", "dev MB"]
    cols += ["nodes", "parts", "max abs", "max rel"]
    lines = [f"{'':<10}" + "".join(f"{c:>11}" for c in cols)]
    for r in report["results"]:
        nodes = f"{r['delegated_nodes']}/{r['total_nodes']}" if r["name"] != "cpu" else "-"
        vals = [r["init_ms"], r["first_ms"], r["median_ms"], r["p90_ms"], r["min_ms"]]
        # A row without timed runs (Ctrl-C before its turn) has no statistics: "-", not nan.
        row = "".join(
            f"{v:>11.3f}" if v == v else f"{'-':>11}" for v in [*vals, r["rss_mb"], r["device_mb"]]
        )
        row += f"{nodes:>11}{r['partitions'] if r['name'] != 'cpu' else '-':>11}"
        row += f"{r['max_abs_diff']:>11.2e}{r['max_rel_diff']:>11.2e}"
        lines.append(f"{r['name']:<10}" + row)
        if r.get("driver_setup_ms"):
            lines.append(
                f"{'':<10}init {r['init_ms']:.1f} ms = {r['driver_setup_ms']:.1f} ms OpenCL driver "
                f"setup (devices + context, once per process; clgpu_delegate.warm_up() can "
                f"overlap it) + {r['init_ms'] - r['driver_setup_ms']:.1f} ms delegate and "
                "interpreter"
            )
        if r.get("first_on_cpu"):
            lines.append(
                f"{'':<10}first: TFLite's CPU kernels ran it while the programs built "
                "(cpu_warmup); the other rows time the device"
            )
    return lines


def _memory(m: dict[str, Any]) -> list[str]:
    mb = 2**20
    lb = m["lower_bound_bytes"] or 1
    arenas = m.get("arenas") or []
    lines = [
        f"device memory: activations {m['allocated_bytes'] / mb:.2f} MB allocated "
        f"{'(' + '/'.join(arenas) + ') ' if arenas else ''}"
        f"(lower bound {m['lower_bound_bytes'] / mb:.2f} MB, x{m['allocated_bytes'] / lb:.3f}; "
        f"naive {m['naive_bytes'] / mb:.2f} MB), weights {m['weight_bytes'] / mb:.2f} MB"
    ]
    if m.get("host_wrapped_bytes"):
        lines.append(
            f"zero-copy: {m['host_wrapped_bytes'] / mb:.2f} MB of partition inputs/outputs "
            "used in place in host memory (not in the activation figures)"
        )
    return lines


def _speedup(report: BenchReport) -> str:
    if report.get("interrupted") and report["speedup"] is None:
        return "interrupted (Ctrl-C): the rows hold the runs made until then; no speed-up"
    if report["speedup"] is None:
        return (
            "no speed-up to report: the delegate ran nothing, so both rows timed TFLite's own "
            "CPU kernels (their difference is noise)"
        )
    line = (
        f"delegate speed-up over CPU: {report['speedup']:.2f}x by median, "
        f"{report['speedup_min'] or 0:.2f}x by fastest run"
    )
    if report["warnings"]:
        line += " (unreliable: see the warnings)"
    return line


def format_report(report: BenchReport) -> str:
    lines = [
        f"model {report['model']}  device {report['device']} ({report['device_type']}, "
        f"driver {report['driver']})  CPU threads {report['cpu_threads']}  "
        f"runtime {report['runtime']}",
        *_table(report),
    ]
    if "plan" in report:
        p, ms = report["plan"], report["plan"]["ms"]
        lines.append(
            f"measured plan: {p['winner']}{' (stored)' if p['cached'] else ''}, "
            f"{ms['default'] / ms[p['winner']]:.2f}x the default plan; medians ms: "
            + ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
        )
    if report.get("memory"):
        lines += _memory(report["memory"])
    lines.append(report["delegation"])
    if report.get("timing") == "blocks" and report["speedup"] is not None:
        lines.append(
            "timed in blocks, every CPU run first: the OpenCL device runs on the CPU's own "
            "cores, and its busy worker threads would slow CPU runs alternating with it"
        )
    elif report.get("timing") == "blocks":
        lines.append(
            "timed in blocks, every CPU run first: two interpreters' CPU thread pools "
            "alternating take the cores from each other"
        )
    lines.append(_speedup(report))
    lines += [f"warning: {w}" for w in report["warnings"]]
    if "profile_note" in report:
        lines.append(report["profile_note"])
    if "profile_table" in report:
        lines += ["", "top ops:", report["profile_table"]]
        share = report.get("kernel_share_of_invoke")
        # 0 is a real answer: on a busy host the event overhead measured at load can
        # cover a tiny model's kernels whole.
        if share is not None:
            lines.append(
                f"kernels {report['kernel_ms_per_invoke']:.3f} ms per invoke = "
                f"{100 * share:.0f}% of the median delegate invoke "
                "(profiled separately; the rest: uploads, downloads, CPU ops, host enqueue and "
                f"launch gaps). Events timed {report['kernel_ms_per_invoke_as_timed']:.3f} ms: "
                f"each adds {report['event_overhead_us']:.2f} us on this device"
            )
    return "\n".join(lines)


def plot_report(report: BenchReport, path: str | Path) -> Path:
    """A bar per row (median), with whiskers from the fastest run to the p90."""
    require_extra("plot", "the benchmark's plot", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cpu, dev = report["results"]
    names = ["TFLite CPU", f"delegate\n({dev['delegated_nodes']} of {dev['total_nodes']} nodes)"]
    med = [r["median_ms"] for r in (cpu, dev)]
    err = [[r["median_ms"] - r["min_ms"] for r in (cpu, dev)]]
    err.append([r["p90_ms"] - r["median_ms"] for r in (cpu, dev)])
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.bar(names, med, yerr=err, capsize=6, color=["#888", "#2a7"])
    ax.set_ylabel("ms / inference (median; min to p90)")
    title = f"{report['model']} on {report['device']}"
    if report["speedup"] is None:
        title += "\nnothing delegated: both bars are TFLite CPU"
    elif report["warnings"]:
        title += "\nrun times spread widely: medians unreliable"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def write_json(report: BenchReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2))
