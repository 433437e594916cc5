"""Per-op GPU profile of a delegate (`load(profiling=True)`, then `delegate.profile()`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._core import ProfileSnapshot


@dataclass(frozen=True)
class KernelStat:
    """One kernel of one TFLite node, aggregated over invokes."""

    partition: int
    node: int
    op: str
    algorithm: str
    kernel: str
    shape: str
    count: int
    total_ms: float  # event times less the per-event overhead (Profile.event_overhead_us)
    flops: float  # per run
    bytes: float  # per run (activations in + out + weights)
    raw_ms: float  # event times as the driver reports them

    @property
    def mean_ms(self) -> float:
        return self.total_ms / max(self.count, 1)

    @property
    def _rate_ms(self) -> float:
        # Rates use the events' own times: on a kernel not much longer than the overhead,
        # the difference would give absurd rates; this way they are a lower bound.
        return self.raw_ms / max(self.count, 1)

    @property
    def gflops(self) -> float:
        return self.flops / (self._rate_ms * 1e6) if self._rate_ms > 0 else 0.0

    @property
    def gbytes_per_s(self) -> float:
        return self.bytes / (self._rate_ms * 1e6) if self._rate_ms > 0 else 0.0


@dataclass(frozen=True)
class PartitionStat:
    """Upload / compute / download device time of one partition, summed over invokes."""

    partition: int
    invokes: int
    upload_ms: float
    compute_ms: float
    download_ms: float
    wall_ms: float
    upload_bytes: int
    download_bytes: int
    kernels_per_invoke: int
    # Where wall time beyond the device work goes: host time until the last command was
    # enqueued, and the device's span from the first command's start to the last one's end
    # (span - upload - compute - download = the device idle between commands, e.g. waiting
    # for the host to enqueue; wall - span = before the first command starts + the sync).
    enqueue_ms: float = 0.0
    span_ms: float = 0.0
    compute_raw_ms: float = 0.0  # compute_ms before the per-event overhead came off

    @property
    def device_idle_ms(self) -> float:
        # The span is measured with the events, so it holds their overhead: compare it
        # with the events' own times.
        busy = self.upload_ms + self.compute_raw_ms + self.download_ms
        return max(self.span_ms - busy, 0.0)


class Profile:
    """Timings from OpenCL events: per node/kernel, per partition, and a trace.

    A profiling event makes the kernel it times look longer than it runs among the others
    (bench/results/models-*.md, "event overhead us"). The delegate measures that once per
    device when a profiling delegate is created (`event_overhead_us`) and takes it off each
    kernel's time (`total_ms`; `raw_ms` keeps the events' own). The Chrome trace shows the
    events as timed."""

    def __init__(self, raw: ProfileSnapshot) -> None:
        self.enabled: bool = raw.enabled
        self.event_overhead_us: float = raw.event_overhead_ns / 1e3
        self.kernels = [
            KernelStat(
                partition=k.partition,
                node=k.node,
                op=k.op,
                algorithm=k.algorithm,
                kernel=k.kernel,
                shape=k.shape,
                count=k.count,
                total_ms=k.total_ns / 1e6,
                flops=k.flops,
                bytes=k.bytes,
                raw_ms=k.raw_ns / 1e6,
            )
            for k in raw.kernels
        ]
        self.partitions = [
            PartitionStat(
                partition=p.partition,
                invokes=p.invokes,
                upload_ms=p.upload_ns / 1e6,
                compute_ms=p.compute_ns / 1e6,
                download_ms=p.download_ns / 1e6,
                wall_ms=p.wall_ns / 1e6,
                upload_bytes=p.upload_bytes,
                download_bytes=p.download_bytes,
                kernels_per_invoke=p.kernels_per_invoke,
                enqueue_ms=p.enqueue_ns / 1e6,
                span_ms=p.span_ns / 1e6,
                compute_raw_ms=p.compute_raw_ns / 1e6,
            )
            for p in raw.partitions
        ]
        self._trace = raw.trace

    def nodes(self) -> list[int]:
        """TFLite node indices that have at least one timed kernel."""
        return sorted({k.node for k in self.kernels})

    def invokes(self) -> int:
        return max((p.invokes for p in self.partitions), default=0)

    def kernel_ms_per_invoke(self, raw: bool = False) -> float:
        """Kernel time per invoke, less the event overhead (or as the events timed it)."""
        n = max(self.invokes(), 1)
        return sum(k.raw_ms if raw else k.total_ms for k in self.kernels) / n

    def top(self, n: int = 10) -> list[KernelStat]:
        return sorted(self.kernels, key=lambda k: k.total_ms, reverse=True)[:n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "event_overhead_us": self.event_overhead_us,
            "kernels": [
                asdict(k) | {"mean_ms": k.mean_ms, "gflops": k.gflops} for k in self.kernels
            ],
            "partitions": [
                asdict(p) | {"device_idle_ms": p.device_idle_ms} for p in self.partitions
            ],
        }

    def table(self, limit: int | None = None) -> str:
        """Text table: kernels by total time, then per-partition transfer/compute split."""
        if not self.enabled:
            return "profiling is off: create the delegate with load(profiling=True)"
        if not self.kernels and not any(p.invokes for p in self.partitions):
            return (
                "profile: no kernel was timed (nothing was delegated, or no invoke ran on the "
                "device yet); `inspect` says why nodes stay on the CPU"
            )
        rows = self.top(limit or len(self.kernels))
        total = sum(k.total_ms for k in self.kernels) or 1.0
        # Text columns as wide as their longest entry: fused algorithm names
        # ("implicit_gemm+ADD+RELU6") and kernel names outgrow any fixed width.
        w_op = max([18, *(len(k.op) for k in rows)])
        w_alg = max([14, *(len(k.algorithm) for k in rows)])
        w_ker = max([24, *(len(k.kernel) for k in rows)])
        lines = [
            f"{'node':>5} {'op':<{w_op}} {'algorithm':<{w_alg}} {'kernel':<{w_ker}} {'calls':>6} "
            f"{'mean ms':>9} {'%':>5} {'GFLOP/s':>9} {'GB/s':>7}  shape"
        ]
        for k in rows:
            lines.append(
                f"{k.node:>5} {k.op:<{w_op}} {k.algorithm:<{w_alg}} {k.kernel:<{w_ker}} "
                f"{k.count:>6} {k.mean_ms:>9.4f} {100 * k.total_ms / total:>5.1f} "
                f"{k.gflops:>9.1f} {k.gbytes_per_s:>7.1f}  {k.shape}"
            )
        lines.append("")
        lines.append(
            f"{'partition':>9} {'invokes':>7} {'upload ms':>10} {'compute ms':>11} "
            f"{'download ms':>12} {'wall ms':>9} {'kernels':>8} {'enqueue ms':>11} "
            f"{'span ms':>9} {'idle ms':>8}   (means per invoke)"
        )
        for p in self.partitions:
            n = max(p.invokes, 1)
            lines.append(
                f"{p.partition:>9} {p.invokes:>7} {p.upload_ms / n:>10.4f} "
                f"{p.compute_ms / n:>11.4f} {p.download_ms / n:>12.4f} "
                f"{p.wall_ms / n:>9.4f} {p.kernels_per_invoke:>8} {p.enqueue_ms / n:>11.4f} "
                f"{p.span_ms / n:>9.4f} {p.device_idle_ms / n:>8.4f}"
            )
        lines.append(
            f"kernel times: event times less {self.event_overhead_us:.2f} us per kernel, what "
            f"an event adds on this device (measured at load); as timed by the events "
            f"{self.kernel_ms_per_invoke(raw=True):.4f} ms per invoke"
        )
        return "\n".join(lines)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write the recorded events as Chrome trace JSON (chrome://tracing, Perfetto)."""
        events = []
        t0 = min((e.start_ns for e in self._trace), default=0)
        for e in self._trace:
            events.append(
                {
                    "name": e.name,
                    "cat": e.category,
                    "ph": "X",
                    "pid": 1,
                    "tid": e.partition,
                    "ts": (e.start_ns - t0) / 1000.0,
                    "dur": max(e.end_ns - e.start_ns, 0) / 1000.0,
                    "args": {"node": e.node, "partition": e.partition},
                }
            )
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        return path
