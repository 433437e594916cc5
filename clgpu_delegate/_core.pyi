# Types of the compiled extension (src_cpp/python/register_*.cc); keep in step with them.
# The TypedDicts exist only for type checkers: at run time the values are plain dicts.

import types
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

_errors: types.ModuleType  # clgpu_delegate._errors, kept alive for the exception translator

# ---- register_devices.cc ------------------------------------------------------------------

class _DeviceDict(TypedDict):
    index: int
    platform: str
    name: str
    vendor: str
    type: str
    opencl_version: str
    opencl_c_version: str
    driver_version: str
    compute_units: int
    max_clock_mhz: int
    global_mem_bytes: int
    local_mem_bytes: int
    max_alloc_bytes: int
    max_work_group_size: int
    host_unified_memory: bool
    fp16_advertised: bool
    fp16: bool
    int8_dot: str
    architecture: str
    tuning_keys: list[str]

class _DeviceProfileDict(TypedDict):
    vendor: str
    architecture: str
    gpu: bool
    cpu: bool
    integer_dot_product: bool
    subgroups: bool
    unified_memory: bool
    gpu_plans: bool
    zero_copy_io: bool
    auto_fp16: bool
    shared_arena: bool
    decline_partitions: bool
    nvidia_ptx: bool
    tuning_keys: list[str]
    tiles: dict[str, tuple[int, int, int, int, int, int, int, int]]

def devices(probe_fp16: bool = True) -> list[_DeviceDict]: ...
def select_device(spec: str = "auto") -> _DeviceDict: ...
def warm_up(spec: str = "auto") -> float: ...
def _device_profile(facts: Mapping[str, Any], tiles: Sequence[str] = ...) -> _DeviceProfileDict: ...
def opencl_library() -> str: ...
def reset_opencl_for_testing() -> None: ...

# ---- register_delegate.cc -----------------------------------------------------------------

class _NodeDecisionDict(TypedDict):
    subgraph: int
    node: int
    op: int
    op_name: str  # "" for ops the core does not know (Python maps the code)
    delegated: bool
    reason: str
    note: str

class _AbiDict(TypedDict):
    tensors_size: int
    node_to_registration: int
    node_stride: int
    nodes_seen: int
    params_read: list[str]

class _StatsDict(TypedDict):
    prepares: int
    kernels_created: int
    invokes: int
    driver_setup_us: int
    programs_built: int
    program_cache_hits: int
    program_binary_loads: int
    program_build_us: int
    program_cubins_stored: int
    plans: int
    binds: int
    warmups: int
    warming: int
    cpu_invokes: int
    fp32_fallback_ops: list[int]
    fp16_saturated_ops: list[int]
    buffers_created: int
    host_syncs: int
    uploads: int
    downloads: int
    upload_bytes: int
    download_bytes: int
    host_enqueue_us: int
    host_wait_us: int
    calibration_source: str
    calibration_kernel_us: float
    calibration_copy_us: float
    calibration_sync_us: float
    calibration_gbps: float | None
    calibration_gflops: float | None
    # Only when the delegate has a disk cache (serialization_dir).
    disk_cache_hits: NotRequired[int]
    disk_cache_misses: NotRequired[int]
    disk_cache_rejected: NotRequired[int]
    disk_cache_driver_rejected: NotRequired[int]
    disk_cache_stored: NotRequired[int]

class _PartitionMemoryDict(TypedDict):
    partition: int
    naive_bytes: int
    lower_bound_bytes: int
    allocated_bytes: int
    weight_bytes: int
    staging_bytes: int
    scratch_bytes: int
    host_wrapped_bytes: int
    buffers: int
    arena: str
    split_tensors: int
    split_pieces: int
    split_bytes: int
    chunked_ops: int
    chunks: int
    chunk_staging_bytes: int

class _KernelRecordDict(TypedDict):
    partition: int
    node: int
    op: str
    algorithm: str
    kernel: str
    shape: str
    flops: float
    bytes: float
    count: int
    total_ns: float
    raw_ns: float

class _PartitionRecordDict(TypedDict):
    partition: int
    invokes: int
    upload_ns: float
    compute_ns: float
    compute_raw_ns: float
    download_ns: float
    wall_ns: float
    enqueue_ns: float
    span_ns: float
    upload_bytes: int
    download_bytes: int
    kernels_per_invoke: int

# name, category, partition, node, start_ns, end_ns (device clock)
_TraceEvent = tuple[str, str, int, int, int, int]

class _ProfileDict(TypedDict):
    enabled: bool
    event_overhead_ns: float
    kernels: list[_KernelRecordDict]
    partitions: list[_PartitionRecordDict]
    trace: list[_TraceEvent]

class Delegate:
    """Owns one native TfLiteDelegate; methods other than close() raise once it is closed."""

    def __init__(self, options: Mapping[str, str]) -> None: ...
    def pointer(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def decisions(self) -> list[_NodeDecisionDict]: ...
    def partitions(self) -> list[list[int]]: ...
    def partition_subgraphs(self) -> list[int]: ...
    def abi(self) -> _AbiDict: ...
    def stats(self) -> _StatsDict: ...
    def profile(self) -> _ProfileDict: ...
    def memory(self) -> list[_PartitionMemoryDict]: ...
    def captured(self) -> dict[int, npt.NDArray[np.float32]]: ...
    def reset_profile(self) -> None: ...
    def wait_ready(self, timeout: float = -1.0) -> bool: ...
    def device(self) -> _DeviceDict: ...

def abi_layout() -> dict[str, int]: ...
def option_keys() -> list[str]: ...
def conv_algorithms() -> list[str]: ...

# ---- register_kernels.cc ------------------------------------------------------------------

class KernelRunner:
    """Runs one kernel of kernels/ on numpy arrays (kernel tests and benchmarks)."""

    def __init__(self, device: str = "auto") -> None: ...
    def build(self, file: str, defines: str = "") -> None: ...
    def build_log(self, file: str, defines: str = "") -> str: ...
    def build_source(self, source: str, options: str = "") -> None: ...
    # args: C-contiguous writeable arrays (read back in place), ints and floats; a list.
    # Returns the kernel time in ns per run.
    def run(
        self,
        file: str,
        kernel: str,
        defines: str,
        args: list[Any],
        global_size: Sequence[int],
        local_size: Sequence[int] = ...,
        repeat: int = 1,
    ) -> float: ...
    def run_source(
        self,
        source: str,
        kernel: str,
        options: str,
        args: list[Any],
        global_size: Sequence[int],
        local_size: Sequence[int] = ...,
        repeat: int = 1,
    ) -> float: ...
    def clblast_sgemm(self, library: str, m: int, n: int, k: int, repeat: int = 5) -> float: ...
    @property
    def device(self) -> _DeviceDict: ...

# ---- register_planner.cc ------------------------------------------------------------------

class _MemoryPlanDict(TypedDict):
    assignment: list[int]
    buffer_bytes: list[int]
    allocated_bytes: int
    naive_bytes: int
    lower_bound_bytes: int
    shared_lower_bound_bytes: int
    valid: bool

def plan_shared_objects(
    usages: Sequence[tuple[int, int, int]], strategy: str = "search"
) -> _MemoryPlanDict: ...
