"""Benchmark a model on stock TFLite CPU (XNNPACK as the runtime applies it) and with
the delegate, in one process, alternating runs (`clgpu-delegate bench`). The report's text,
plot and JSON forms are in bench_report.py."""

from __future__ import annotations

import gc
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import require_extra
from .bench_report import format_report, plot_report, timing_warnings, write_json
from .bench_result import BenchReport, Result
from .results import MemoryReport
from .runtime import InputShapes, random_inputs

__all__ = [
    "BenchReport",
    "Result",
    "format_report",
    "plot_report",
    "run_benchmark",
    "write_json",
]

DEFAULT_MODEL = "mobilenet_v2"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def looks_like_path(model: str) -> bool:
    """A model argument that names a file rather than a built-in model."""
    return model.endswith(".tflite") or os.sep in model or Path(model).exists()


def _model_bytes(model: str | None, size: int | None) -> tuple[str, str, bytes]:
    """(name, source, bytes) of a .tflite path or a built-in model, verified."""
    from .modelfile import verify_model

    if model is None:
        model = DEFAULT_MODEL
    if looks_like_path(model):
        if size:
            raise ValueError("size applies to built-in models only, not to a .tflite file")
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"model file not found: {model}")
        verify_model(path)
        return path.stem, str(path), path.read_bytes()
    from .modelgen import zoo

    opts = {"size": size} if size else {}
    return model, "built-in", zoo.path(model, **opts).read_bytes()


class _Runner:
    """One interpreter plus its timing record."""

    def __init__(
        self,
        name: str,
        model: bytes,
        delegate_options: dict[str, Any] | None,
        threads: int,
        runtime: str | None,
        input_shapes: InputShapes | None = None,
    ) -> None:
        from .delegate import load
        from .runtime import allocate, make_interpreter

        self.result = Result(name)
        self.memory: MemoryReport | None = None  # after first()
        self.last: list[npt.NDArray[Any]] = []  # outputs of the last run
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        self.delegate = load(**delegate_options) if delegate_options is not None else None
        self.interp = make_interpreter(
            model, [self.delegate] if self.delegate else None, runtime=runtime, num_threads=threads
        )
        allocate(self.interp, input_shapes)
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
        if self.delegate is not None and self.delegate.stats().cpu_invokes:
            # cpu_warmup: that result came from TFLite's CPU kernels while the programs built;
            # what follows compares and times the device's.
            self.result.first_on_cpu = True
            self.delegate.wait_ready()
            self.run(feeds)
        self.result.rss_mb = _rss_mb() - self._rss0
        if self.delegate is not None:
            mem = self.delegate.memory()
            self.result.device_mb = mem.allocated_total_bytes / 2**20
            self.memory = mem


def _load_warning() -> list[str]:
    """Other processes on the cores: a CPU row waits for its threads to be scheduled."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    if load <= cores:
        return []
    return [
        f"the machine is busy (load average {load:.1f} on {cores} cores): other processes "
        "share the cores, so run times vary"
    ]


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
    block: int = 1,
    input_shapes: InputShapes | None = None,
    **delegate_options: Any,
) -> BenchReport:
    """Benchmark CPU vs delegate on one model; returns a JSON-able report. With min_seconds,
    pairs of runs continue past `runs` until that much time has passed (a model of a few
    kernels needs thousands of runs for a median that jitter does not move:
    docs/performance.md, LeNet-5). `delegate_options` are load()'s (partitioning: its
    default unless given, or "measure": time the plans with plan() and run the fastest).
    block: the CPU and the delegate alternate in blocks of that many runs (1: every run). A
    delegate invoke that follows a CPU run, or any idle time, is slower than one right after
    the previous invoke (the GPU and the driver's threads idle meanwhile:
    docs/performance.md has the figures); blocks time the delegate as an application that
    invokes it in a loop sees it. input_shapes: {input name: shape} for a model whose
    declared shapes it cannot run at (a dynamic dimension); "" names the only input. Ctrl-C
    during the timed runs ends them: the report holds the runs made ("interrupted": True)."""
    require_extra("bench", "the benchmark", "tqdm", "tflite", "flatbuffers")
    from .runtime import resolve_runtime

    if runs < 1:
        raise ValueError(f"runs must be at least 1 (got {runs})")
    if block < 1:
        raise ValueError(f"block must be at least 1 (got {block})")
    threads = threads or os.cpu_count() or 1
    runtime = resolve_runtime(runtime)
    name, source, data = _model_bytes(model, size)
    if delegate_options.get("partitioning") is None:  # load()'s default: $CLGPU_PARTITIONING, cost
        delegate_options.pop("partitioning", None)
    measured = None
    if delegate_options.get("partitioning") == "measure":  # run what plan() measured fastest
        from .planning import plan_in_child

        del delegate_options["partitioning"]
        measured = plan_in_child(
            data, threads=threads, runtime=runtime, input_shapes=input_shapes, **delegate_options
        )
        delegate_options = dict(measured.options)
    cpu = _Runner("cpu", data, None, threads, runtime, input_shapes)
    gpu = _Runner("delegate", data, delegate_options, threads, runtime, input_shapes)
    feeds = random_inputs(cpu.inputs)
    cpu.first(feeds)
    gpu.first(feeds)
    for a, b in zip(cpu.last, gpu.last, strict=True):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        gpu.result.max_abs_diff = max(gpu.result.max_abs_diff, float(diff.max(initial=0)))
        scale = float(np.abs(a).max(initial=0)) or 1.0
        gpu.result.max_rel_diff = max(gpu.result.max_rel_diff, float(diff.max(initial=0)) / scale)
    assert gpu.delegate is not None  # delegate options were given
    dev = gpu.delegate.device
    # An OpenCL device on the host's own cores keeps its worker threads busy after a run,
    # which slows a CPU run right after it: there each row is timed in a block of its own. So
    # are two rows that both run TFLite's CPU kernels (nothing delegated): each interpreter's
    # thread pool spins after its run and took the cores from the other (lenet5 on 2 cores:
    # 4 ms a run alternating, 0.03 ms in a block).
    blocks = dev.type == "cpu" or gpu.result.delegated_nodes == 0
    groups = ([cpu], [gpu]) if blocks else ([cpu, gpu],)
    interrupted = _time_rows(groups, feeds, runs, min_seconds, block, name, progress)
    from .report import delegation_summary

    results = [cpu.result.summary(), gpu.result.summary()]
    delegated = gpu.result.delegated_nodes > 0
    compared = delegated and bool(cpu.result.runs_ms) and bool(gpu.result.runs_ms)
    report: BenchReport = {
        "model": name,
        "model_source": source,
        "size": size,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_threads": threads,
        "runs": runs,
        "runtime": runtime,
        "device": dev.name,
        "device_type": dev.type,
        "driver": dev.driver_version,
        "delegate_options": {
            "partitioning": os.environ.get("CLGPU_PARTITIONING") or "cost",  # load()'s default
            **{k: str(v) for k, v in delegate_options.items()},
        },
        "results": results,
        "delegation": delegation_summary(gpu.delegate.decisions(), gpu.result.partitions, dev.type),
        "speedup": cpu.result.median_ms / gpu.result.median_ms if compared else None,
        "speedup_min": cpu.result.min_ms / gpu.result.min_ms if compared else None,
        "warnings": timing_warnings(results) + _load_warning(),
        "timing": "blocks"
        if blocks
        else "alternating" + (f" blocks of {block} runs" if block > 1 else ""),
    }
    if measured is not None:
        report["plan"] = measured.summary()
        if not delegated:
            report["delegation"] = (
                f"delegated 0 of {gpu.result.total_nodes} nodes: partitioning measure timed "
                "the plans and none that delegates was faster than the CPU"
            )
    if gpu.memory is not None:
        report["memory"] = {k: v for k, v in gpu.memory.to_dict().items() if k != "partitions"}
    if input_shapes:
        report["input_shapes"] = {k: list(v) for k, v in input_shapes.items()}
    if interrupted:
        report["interrupted"] = True
    elif profile and delegated:
        _profile(report, data, delegate_options, threads, runtime, feeds, gpu.result)
    elif profile:
        report["profile_note"] = "profile: nothing was delegated, so there are no kernels to time"
    return report


def _time_rows(
    groups: tuple[list[_Runner], ...],
    feeds: list[npt.NDArray[Any]],
    runs: int,
    min_seconds: float,
    block: int,
    name: str,
    progress: bool,
) -> bool:
    """The timed runs, appended to each row's result; True when Ctrl-C ended them (the runs
    made so far are kept: a long benchmark interrupted still reports what it measured)."""
    from tqdm import tqdm

    gc.disable()  # a collection inside a timed run is noise
    bar = tqdm(total=runs * len(groups), desc=f"bench {name}", disable=not progress)
    try:
        for rows in groups:
            t_end = time.perf_counter() + min_seconds / len(groups)
            while len(rows[0].result.runs_ms) < runs or time.perf_counter() < t_end:
                for r in rows:
                    for _ in range(block):
                        r.result.runs_ms.append(r.run(feeds))
                bar.update(block)
    except KeyboardInterrupt:
        return True
    finally:
        bar.close()
        gc.enable()
    return False


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
