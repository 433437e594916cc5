"""clgpu_delegate: an OpenCL GPU delegate for TensorFlow Lite and LiteRT.

delegate = clgpu_delegate.load()
interp = Interpreter(model_path="model.tflite", experimental_delegates=[delegate])
"""

from ._errors import (
    BuildError,
    ClgpuError,
    InvalidModelError,
    NativeExtensionMissing,
    NoDeviceError,
    OpenCLError,
)
from .delegate import Delegate, load, plugin_path
from .devices import Device, WarmUp, devices, select_device, warm_up
from .modelfile import verify_model
from .planning import Candidate, Plan, plan
from .precision import PrecisionReport, check_precision
from .profile import Profile
from .results import AbiObservation, DelegateStats, MemoryReport, NodeDecision, PartitionMemory

__version__ = "0.1.0"

__all__ = [
    "AbiObservation",
    "BuildError",
    "Candidate",
    "ClgpuError",
    "Delegate",
    "DelegateStats",
    "Device",
    "InvalidModelError",
    "MemoryReport",
    "NativeExtensionMissing",
    "NoDeviceError",
    "NodeDecision",
    "OpenCLError",
    "PartitionMemory",
    "Plan",
    "PrecisionReport",
    "Profile",
    "WarmUp",
    "check_precision",
    "devices",
    "load",
    "plan",
    "plugin_path",
    "select_device",
    "verify_model",
    "warm_up",
]
