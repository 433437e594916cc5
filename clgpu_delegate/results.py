"""Typed records the delegate reports: per-node decisions, device memory, counters, ABI.

Frozen dataclasses built from the native core's plain values; `to_dict()` gives the JSON
form (properties included). `record["key"]` still reads a field: callers written against
the dicts these replaced keep working while they move to attributes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ._core import _StatsDict


class _Record:
    """`to_dict()` and read-only `record["field"]` for the dataclasses below."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _derived: ClassVar[tuple[str, ...]] = ()  # properties that to_dict() adds to the fields

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, tuple) and v and isinstance(v[0], _Record):
                v = [x.to_dict() for x in v]
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out | {k: getattr(self, k) for k in self._derived}

    def __getitem__(self, key: str) -> Any:
        if key in self.__dataclass_fields__ or key in self._derived:
            return getattr(self, key)
        raise KeyError(key)


@dataclass(frozen=True)
class NodeDecision(_Record):
    """What the delegate did with one TFLite node at the last Prepare of its subgraph."""

    subgraph: int  # 0: the primary subgraph; others in the order TFLite prepared them
    node: int
    op: int  # TFLite builtin operator code
    op_name: str
    delegated: bool
    reason: str  # why it stays on the CPU; empty when delegated
    note: str  # how a delegated node runs when notable (in chunks, ...); else empty


@dataclass(frozen=True)
class PartitionMemory(_Record):
    """Device memory of one delegated partition, in bytes (see `MemoryReport`)."""

    partition: int
    naive_bytes: int
    lower_bound_bytes: int
    allocated_bytes: int
    weight_bytes: int
    staging_bytes: int
    scratch_bytes: int
    host_wrapped_bytes: int
    buffers: int
    arena: str  # "sub-buffers" / "svm" (views into one arena), "shared", "own"
    split_tensors: int
    split_pieces: int
    split_bytes: int
    chunked_ops: int
    chunks: int
    chunk_staging_bytes: int


@dataclass(frozen=True)
class MemoryReport(_Record):
    """Device memory of the delegate's live partitions, in bytes, summed over partitions.

    `naive` gives every activation its own buffer; `lower_bound` is the peak of activation
    bytes alive at once; `allocated` is what the lifetime-based planner allocated. The
    `*_total` properties add weights (and fp16 staging copies).

    Larger than the device's largest allocation (`max_alloc_bytes`): `split_tensors`
    activations are kept in `split_pieces` buffers (`split_bytes`, outside the plan above),
    `chunked_ops` ops run as `chunks` sub-ops whose boxes are copied through
    `chunk_staging_bytes` of staging buffers; `allocated_total_bytes` counts both.

    Under zero-copy, partition inputs and outputs are used in place in TFLite's own memory:
    `host_wrapped_bytes`, outside the figures above (a discrete GPU's driver may mirror them
    in device memory).
    """

    naive_bytes: int
    lower_bound_bytes: int
    allocated_bytes: int
    weight_bytes: int
    staging_bytes: int
    split_tensors: int
    split_pieces: int
    split_bytes: int
    chunked_ops: int
    chunks: int
    chunk_staging_bytes: int
    host_wrapped_bytes: int
    partitions: tuple[PartitionMemory, ...]

    _derived = ("naive_total_bytes", "lower_bound_total_bytes", "allocated_total_bytes", "arenas")

    @classmethod
    def from_partitions(cls, parts: list[PartitionMemory]) -> MemoryReport:
        summed = {
            f.name: sum(getattr(p, f.name) for p in parts)
            for f in dataclasses.fields(cls)
            if f.name != "partitions"
        }
        return cls(**summed, partitions=tuple(parts))

    @property
    def naive_total_bytes(self) -> int:
        return self.naive_bytes + self.weight_bytes

    @property
    def lower_bound_total_bytes(self) -> int:
        return self.lower_bound_bytes + self.weight_bytes

    @property
    def allocated_total_bytes(self) -> int:
        return (
            self.allocated_bytes
            + self.weight_bytes
            + self.staging_bytes
            + self.split_bytes
            + self.chunk_staging_bytes
        )

    @property
    def arenas(self) -> list[str]:
        """Where activations live, one entry per kind of partition arena."""
        return sorted({p.arena for p in self.partitions})


@dataclass(frozen=True)
class DelegateStats(_Record):
    """Counters of one delegate since it was created."""

    prepares: int
    kernels_created: int
    invokes: int
    driver_setup_us: int  # OpenCL device listing + context creation (0 when reused)
    programs_built: int
    program_cache_hits: int
    # Of the device environment (shared by the delegates of a process): programs loaded from
    # serialization_dir's binaries, and the wall time of all builds and loads summed over the
    # threads that ran them (so it may exceed the elapsed time).
    program_binary_loads: int
    program_build_us: int
    # Of those stored in serialization_dir, binaries kept as NVIDIA machine code (cubin, which
    # loads at once) rather than PTX (which the driver compiles again at each load).
    program_cubins_stored: int
    # Set-up work, which a steady-state invoke repeats none of...
    plans: int  # partition memory plans (at init, then when input shapes change)
    binds: int  # kernel arguments bound (after a plan, or when TFLite moved a tensor)
    # cpu_warmup: partitions whose programs built in the background, those still building, and
    # the invokes TFLite's CPU kernels ran for them meanwhile (not counted in `invokes`).
    warmups: int
    warming: int
    cpu_invokes: int
    # fp16 storage, values past its range (65504): the nodes (execution-plan indices) that run
    # in float32 since their values (or a float32 value they read) left it, the others staying
    # fp16 (precision="auto", that invoke included), or whose values were saturated
    # (precision="fp16", said once in a warning). Sorted.
    fp32_fallback_ops: list[int]
    fp16_saturated_ops: list[int]
    buffers_created: int  # OpenCL buffers of the delegate's device environment
    # ...and what every invoke does: host waits and partition boundary transfers.
    host_syncs: int
    uploads: int
    downloads: int
    upload_bytes: int
    download_bytes: int
    # Host time of all invokes so far, split where the last command was enqueued: enqueueing
    # (the commands and transfers), then waiting for the device to finish. An invoke whose time
    # is mostly enqueueing is bound by the host, not the device.
    host_enqueue_us: int
    host_wait_us: int
    # The cost model's device figures (CLGPU_CALIBRATION): "measured", "cache" (this
    # process), "file" (serialization_dir) or "constants"; GB/s and GFLOP/s None when not measured.
    calibration_source: str
    calibration_kernel_us: float
    calibration_copy_us: float
    calibration_sync_us: float
    calibration_gbps: float | None
    calibration_gflops: float | None
    # Program binaries on disk (serialization_dir): all 0 when the delegate has none.
    disk_cache: bool = False
    disk_cache_hits: int = 0
    disk_cache_misses: int = 0
    disk_cache_rejected: int = 0
    disk_cache_driver_rejected: int = 0
    disk_cache_stored: int = 0

    @classmethod
    def from_native(cls, raw: _StatsDict) -> DelegateStats:
        return cls(**raw, disk_cache="disk_cache_hits" in raw)


@dataclass(frozen=True)
class AbiObservation(_Record):
    """What the delegate saw of the host runtime's ABI at the last Prepare."""

    tensors_size: int
    node_to_registration: int  # bytes from a node to its registration
    node_stride: int  # bytes between consecutive node records
    nodes_seen: int
    params_read: tuple[str, ...]  # "node 3 CONV_2D padding=1 stride=1,1 ..."
