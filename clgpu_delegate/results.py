"""Typed records the delegate reports: devices, per-node decisions, device memory, counters,
ABI.

Each is the native core's own struct, bound field by field (src_cpp/python/register_records.cc,
where each field's meaning is written; `help(clgpu_delegate.DelegateStats)` shows it). They are
read-only; `to_dict()` gives the JSON form (nested records as dicts, computed fields included),
and `record["key"]` still reads a field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = [
    "AbiObservation",
    "DelegateStats",
    "Device",
    "MemoryReport",
    "NodeDecision",
    "PartitionMemory",
]

if TYPE_CHECKING:
    from ._core import (
        AbiObservation,
        DelegateStats,
        Device,
        MemoryReport,
        NodeDecision,
        PartitionMemory,
    )
else:
    try:
        from ._core import (
            AbiObservation,
            DelegateStats,
            Device,
            MemoryReport,
            NodeDecision,
            PartitionMemory,
        )
    except ImportError:  # no extension: the package still imports (_native.py says why)

        class _NoExtension:
            """Stands in for a native record when the extension is missing (none is made)."""

        AbiObservation = DelegateStats = Device = MemoryReport = NodeDecision = _NoExtension
        PartitionMemory = _NoExtension
