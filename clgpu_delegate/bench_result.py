"""What `clgpu-delegate bench` measures for one row (`Result`) and the report it returns and
writes as JSON (`BenchReport`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

import numpy as np

__all__ = ["BenchReport", "Result", "ResultSummary"]


class ResultSummary(TypedDict):
    """`Result` as the report holds it: its fields less the runs, plus their statistics."""

    name: str
    init_ms: float
    driver_setup_ms: float
    first_ms: float
    first_on_cpu: bool  # cpu_warmup: the first result came from TFLite's CPU kernels
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
    model_source: str  # the .tflite path, or "built-in" (clgpu_delegate.modelgen.zoo)
    size: int | None  # a built-in model's input size, when not its default
    date: str
    host: str
    cpu_threads: int
    runs: int  # timed runs asked for (each row's "runs" says how many were made)
    runtime: str  # the interpreter package that ran both rows
    device: str | None
    device_type: str | None
    driver: str | None
    delegate_options: dict[str, str]
    results: list[ResultSummary]  # cpu, delegate
    # How many nodes the delegate runs and, if not all, why the others stay on the CPU.
    delegation: str
    # CPU median / delegate median; None when the delegate runs nothing (both rows are then
    # the same CPU kernels, and their ratio is noise).
    speedup: float | None
    speedup_min: float | None  # the same from the fastest runs
    warnings: list[str]  # why the medians may not be trusted (few runs, a wide spread)
    # "alternating": a CPU run, a delegate run, ...; "alternating blocks of N runs": N of
    # each in turn; "blocks": every CPU run, then every delegate run (an OpenCL device on the
    # CPU's own cores).
    timing: str
    # Set by the command line: its arguments and `--check-precision`'s per-node errors.
    command: NotRequired[list[str]]
    check_precision: NotRequired[dict[str, Any]]
    plan: NotRequired[dict[str, Any]]  # partitioning="measure": plan()'s winner and medians
    input_shapes: NotRequired[dict[str, list[int]]]  # the inputs' shapes, where given
    # Ctrl-C during the timed runs: the rows hold the runs made until then.
    interrupted: NotRequired[bool]
    # MemoryReport.to_dict() less the partitions (their `arenas` stay).
    memory: NotRequired[dict[str, Any]]
    # With profile=True: from a second, profiled delegate (see _profile).
    profile: NotRequired[dict[str, Any]]  # Profile.to_dict()
    profile_table: NotRequired[str]
    profile_note: NotRequired[str]  # why there is no profile
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
    first_on_cpu: bool = False
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
            first_on_cpu=self.first_on_cpu,
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
