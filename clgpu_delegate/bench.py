"""Benchmark a model on stock TFLite CPU (XNNPACK as the runtime applies it) and with
the delegate, in one process, alternating runs (`python -m clgpu_delegate bench`)."""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

from ._errors import require_extra
from .results import MemoryReport

DEFAULT_MODEL = "mobilenet_v2"


class ResultSummary(TypedDict):
    """`Result` as the report holds it: its fields less the runs, plus their statistics."""

    name: str
    init_ms: float
    driver_setup_ms: float
    first_ms: float
    rss_mb: float
    device_mb: float
    delegated_nodes: int
    total_nodes: int
    partitions: int
    max_abs_diff: float
    max_rel_diff: float
    median_ms: float
    p90_ms: float
    min_ms: float
    runs: int


class BenchReport(TypedDict):
    """What run_benchmark() returns and `bench --json` writes (a JSON document)."""

    model: str
    date: str
    host: str
    cpu_threads: int
    runtime: str
    device: str | None
    device_type: str | None
    driver: str | None
    delegate_options: dict[str, str]
    results: list[ResultSummary]  # cpu, delegate
    speedup: float | None
    plan: NotRequired[dict[str, Any]]  # partitioning="measure": plan()'s winner and medians
    # MemoryReport.to_dict() less the partitions (their `arenas` stay).
    memory: NotRequired[dict[str, Any]]
    # With profile=True: from a second, profiled delegate (see _profile).
    profile: NotRequired[dict[str, Any]]  # Profile.to_dict()
    profile_table: NotRequired[str]
    kernel_ms_per_invoke: NotRequired[float]
    kernel_ms_per_invoke_as_timed: NotRequired[float]
    event_overhead_us: NotRequired[float]
    kernel_share_of_invoke: NotRequired[float | None]


@dataclass
class Result:
    """One configuration's measurements (times in milliseconds)."""

    name: str
    init_ms: float = 0.0
    # Of init_ms, the OpenCL driver's device listing + context creation: once per process
    # (0 when an earlier delegate or warm_up() did it).
    driver_setup_ms: float = 0.0
    first_ms: float = 0.0
    runs_ms: list[float] = field(default_factory=list)
    rss_mb: float = 0.0  # resident set size growth over interpreter creation + first run
    device_mb: float = 0.0
    delegated_nodes: int = 0
    total_nodes: int = 0
    partitions: int = 0
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.runs_ms) if self.runs_ms else float("nan")

    @property
    def p90_ms(self) -> float:
        return float(np.percentile(self.runs_ms, 90)) if self.runs_ms else float("nan")

    @property
    def min_ms(self) -> float:
        return min(self.runs_ms) if self.runs_ms else float("nan")

    def summary(self) -> ResultSummary:
        return ResultSummary(
            name=self.name,
            init_ms=self.init_ms,
            driver_setup_ms=self.driver_setup_ms,
            first_ms=self.first_ms,
            rss_mb=self.rss_mb,
            device_mb=self.device_mb,
            delegated_nodes=self.delegated_nodes,
            total_nodes=self.total_nodes,
            partitions=self.partitions,
            max_abs_diff=self.max_abs_diff,
            max_rel_diff=self.max_rel_diff,
            median_ms=self.median_ms,
            p90_ms=self.p90_ms,
            min_ms=self.min_ms,
            runs=len(self.runs_ms),
        )


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def _model_bytes(model: str | None, size: int | None) -> tuple[str, bytes]:
    from .modelgen import zoo

    if model is None:
        model = DEFAULT_MODEL
    if Path(model).is_file():
        return Path(model).stem, Path(model).read_bytes()
    opts = {"size": size} if size else {}
    return model, zoo.path(model, **opts).read_bytes()


class _Runner:
    """One interpreter plus its timing record."""

    def __init__(
        self,
        name: str,
        model: bytes,
        delegate_options: dict[str, Any] | None,
        threads: int,
        runtime: str | None,
    ) -> None:
        from .delegate import load
        from .runtime import make_interpreter

        self.result = Result(name)
        self.memory: MemoryReport | None = None  # after first()
        self.last: list[npt.NDArray[Any]] = []  # outputs of the last run
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        self.delegate = load(**delegate_options) if delegate_options is not None else None
        self.interp = make_interpreter(
            model, [self.delegate] if self.delegate else None, runtime=runtime, num_threads=threads
        )
        self.interp.allocate_tensors()
        self.result.init_ms = (time.perf_counter() - t0) * 1e3
        self._rss0 = rss0
        self.inputs = self.interp.get_input_details()
        self.outputs = self.interp.get_output_details()
        if self.delegate is not None:
            self.result.driver_setup_ms = self.delegate.stats().driver_setup_us / 1e3
            self.result.delegated_nodes = len(self.delegate.delegated_nodes())
            self.result.total_nodes = len(self.delegate.decisions())
            self.result.partitions = len(self.delegate.partitions())

    def run(self, feeds: list[npt.NDArray[Any]]) -> float:
        for d, x in zip(self.inputs, feeds, strict=True):
            self.interp.set_tensor(d["index"], x)
        t0 = time.perf_counter()
        self.interp.invoke()
        outs = [self.interp.get_tensor(d["index"]) for d in self.outputs]
        dt = (time.perf_counter() - t0) * 1e3
        self.last = outs
        return dt

    def first(self, feeds: list[npt.NDArray[Any]]) -> None:
        self.result.first_ms = self.run(feeds)
        self.result.rss_mb = _rss_mb() - self._rss0
        if self.delegate is not None:
            mem = self.delegate.memory()
            self.result.device_mb = mem.allocated_total_bytes / 2**20
            self.memory = mem


def run_benchmark(
    model: str | None = None,
    *,
    size: int | None = None,
    runs: int = 20,
    threads: int | None = None,
    runtime: str | None = None,
    progress: bool = True,
    profile: bool = False,
    min_seconds: float = 0.0,
    **delegate_options: Any,
) -> BenchReport:
    """Benchmark CPU vs delegate on one model; returns a JSON-able report. With min_seconds,
    pairs of runs continue past `runs` until that much time has passed (a model of a few
    kernels needs thousands of runs for a median that jitter does not move:
    bench/results/lenet-floor-*.md)."""
    require_extra("bench", "the benchmark", "tqdm", "tflite", "flatbuffers")
    from tqdm import tqdm

    threads = threads or os.cpu_count() or 1
    name, data = _model_bytes(model, size)
    delegate_options.setdefault("partitioning", "cost")
    measured = None
    if delegate_options["partitioning"] == "measure":  # run what plan() measured fastest
        from .planning import plan

        del delegate_options["partitioning"]
        measured = plan(data, threads=threads, runtime=runtime, **delegate_options)
        delegate_options = dict(measured.options)
    cpu = _Runner("cpu", data, None, threads, runtime)
    gpu = _Runner("delegate", data, delegate_options, threads, runtime)
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(d["shape"]).astype(d["dtype"]) for d in cpu.inputs]
    cpu.first(feeds)
    gpu.first(feeds)
    for a, b in zip(cpu.last, gpu.last, strict=True):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        gpu.result.max_abs_diff = max(gpu.result.max_abs_diff, float(diff.max(initial=0)))
        scale = float(np.abs(a).max(initial=0)) or 1.0
        gpu.result.max_rel_diff = max(gpu.result.max_rel_diff, float(diff.max(initial=0)) / scale)
    gc.disable()  # a collection inside a timed run is noise
    try:
        bar = tqdm(total=runs, desc=f"bench {name}", disable=not progress, unit="run")
        t_end = time.perf_counter() + min_seconds
        while len(cpu.result.runs_ms) < runs or time.perf_counter() < t_end:
            cpu.result.runs_ms.append(cpu.run(feeds))
            gpu.result.runs_ms.append(gpu.run(feeds))
            bar.update()
        bar.close()
    finally:
        gc.enable()
    dev = gpu.delegate.device if gpu.delegate is not None else None
    report: BenchReport = {
        "model": name,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_threads": threads,
        "runtime": runtime or "default",
        "device": dev.name if dev else None,
        "device_type": dev.type if dev else None,
        "driver": dev.driver_version if dev else None,
        "delegate_options": {k: str(v) for k, v in delegate_options.items()},
        "results": [cpu.result.summary(), gpu.result.summary()],
        "speedup": cpu.result.median_ms / gpu.result.median_ms if gpu.result.runs_ms else None,
    }
    if measured is not None:
        report["plan"] = measured.summary()
    if gpu.memory is not None:
        report["memory"] = {k: v for k, v in gpu.memory.to_dict().items() if k != "partitions"}
    if profile and gpu.delegate is not None:
        _profile(report, data, delegate_options, threads, runtime, feeds, gpu.result)
    return report


def _profile(
    report: BenchReport,
    data: bytes,
    delegate_options: dict[str, Any],
    threads: int,
    runtime: str | None,
    feeds: list[npt.NDArray[Any]],
    timed: Result,
) -> None:
    """Adds to `report` the profile from a delegate of its own, after the timed runs: an
    OpenCL event on every command costs the driver host time per kernel (NVIDIA's most),
    which must not be in the timings. Its kernel time per invoke is set against the
    unprofiled median invoke."""
    options = {**delegate_options, "profiling": True}
    prof_runner = _Runner("profiled", data, options, threads, runtime)
    delegate = prof_runner.delegate
    assert delegate is not None  # delegate options were given
    prof_runner.run(feeds)  # first invoke: builds, uploads
    delegate.reset_profile()  # steady state only
    for _ in range(len(timed.runs_ms)):
        prof_runner.run(feeds)
    prof = delegate.profile()
    kernel_ms = prof.kernel_ms_per_invoke()
    report["profile"] = prof.to_dict()
    report["profile_table"] = prof.table(limit=15)
    report["kernel_ms_per_invoke"] = kernel_ms
    report["kernel_ms_per_invoke_as_timed"] = prof.kernel_ms_per_invoke(raw=True)
    report["event_overhead_us"] = prof.event_overhead_us
    report["kernel_share_of_invoke"] = kernel_ms / timed.median_ms if timed.runs_ms else None


def format_report(report: BenchReport) -> str:
    cols = [
        "init ms",
        "first ms",
        "median ms",
        "p90 ms",
        "min ms",
        "RSS MB",
        "dev MB",
        "nodes",
        "parts",
        "max abs",
        "max rel",
    ]
    lines = [
        f"model {report['model']}  device {report['device']} ({report['device_type']}, "
        f"driver {report['driver']})  CPU threads {report['cpu_threads']}"
    ]
    lines.append(f"{'':<10}" + "".join(f"{c:>11}" for c in cols))
    for r in report["results"]:
        nodes = f"{r['delegated_nodes']}/{r['total_nodes']}" if r["name"] != "cpu" else "-"
        vals = [
            r["init_ms"],
            r["first_ms"],
            r["median_ms"],
            r["p90_ms"],
            r["min_ms"],
            r["rss_mb"],
            r["device_mb"],
        ]
        row = "".join(f"{v:>11.3f}" for v in vals)
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
    if "plan" in report:
        p, ms = report["plan"], report["plan"]["ms"]
        lines.append(
            f"measured plan: {p['winner']}{' (stored)' if p['cached'] else ''}, "
            f"{ms['default'] / ms[p['winner']]:.2f}x the default plan; medians ms: "
            + ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
        )
    if report.get("memory"):
        m = report["memory"]
        mb = 2**20
        lb = m["lower_bound_bytes"] or 1
        arenas = m.get("arenas") or []
        lines.append(
            f"device memory: activations {m['allocated_bytes'] / mb:.2f} MB allocated "
            f"{'(' + '/'.join(arenas) + ') ' if arenas else ''}"
            f"(lower bound {m['lower_bound_bytes'] / mb:.2f} MB, x{m['allocated_bytes'] / lb:.3f}; "
            f"naive {m['naive_bytes'] / mb:.2f} MB), weights {m['weight_bytes'] / mb:.2f} MB"
        )
        if m.get("host_wrapped_bytes"):
            lines.append(
                f"zero-copy: {m['host_wrapped_bytes'] / mb:.2f} MB of partition inputs/outputs "
                "used in place in host memory (not in the activation figures)"
            )
    if report.get("speedup"):
        lines.append(f"delegate speed-up over CPU (median): {report['speedup']:.2f}x")
    if "profile_table" in report:
        lines += ["", "top ops:", report["profile_table"]]
        share = report.get("kernel_share_of_invoke")
        if share:
            lines.append(
                f"kernels {report['kernel_ms_per_invoke']:.3f} ms per invoke = "
                f"{100 * share:.0f}% of the median delegate invoke "
                "(profiled separately; the rest: uploads, downloads, CPU ops, host enqueue and "
                f"launch gaps). Events timed {report['kernel_ms_per_invoke_as_timed']:.3f} ms: "
                f"each adds {report['event_overhead_us']:.2f} us on this device"
            )
    return "\n".join(lines)


def plot_report(report: BenchReport, path: str | Path) -> Path:
    require_extra("plot", "the benchmark's plot", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in report["results"]]
    med = [r["median_ms"] for r in report["results"]]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(names, med, color=["#888", "#2a7"])
    ax.set_ylabel("median ms / inference")
    ax.set_title(f"{report['model']} on {report['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def write_json(report: BenchReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2))
