"""The public delegate object: what `Interpreter(experimental_delegates=[...])` takes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._native import native
from .devices import Device
from .profile import Profile
from .results import AbiObservation, DelegateStats, MemoryReport, NodeDecision

_PLUGIN_NAME = "libclgpu_delegate.so"


def _option_string(key: str, value: Any) -> str:
    """The value as the native parser takes it; ValueError where no text would say it: bytes
    (str() would make "b'...'" of them, a different path) and strings C cannot receive (a lone
    surrogate has no UTF-8 form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        raise ValueError(f"option {ascii(key)[:66]} must be text (str), not bytes")
    text = str(value)
    for part in (key, text):
        try:
            part.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"option {ascii(key)[:66]}: the name or value is not valid UTF-8 text"
            ) from None
    return text


class Delegate:
    """An OpenCL GPU delegate instance. It owns the native TfLiteDelegate: keep it
    alive as long as any interpreter that uses it (interpreters keep a reference)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options: dict[str, str] = {k: _option_string(k, v) for k, v in options.items()}
        self._native = native.Delegate(self.options)

    # The only method the tflite_runtime / ai_edge_litert interpreters call.
    def _get_native_delegate_pointer(self) -> int:
        return int(self._native.pointer())

    def close(self) -> None:
        """Release the delegate now; interpreters using it keep their kernels' resources."""
        self._native.close()

    def __enter__(self) -> Delegate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def device(self) -> Device:
        return self._native.device()

    def decisions(self) -> list[NodeDecision]:
        """Per node of every subgraph prepared (the primary one first; a model with control flow
        or an init subgraph has several): op, delegated or not, why not, and a note on how a
        delegated node runs when notable (in chunks, larger than one buffer)."""
        from .report import op_names

        return self._native.decisions(op_names())

    def delegated_nodes(self) -> list[int]:
        """TFLite node indices claimed, subgraph by subgraph (the primary subgraph's first)."""
        return [d.node for d in self._native.decisions() if d.delegated]

    def partitions(self) -> list[list[int]]:
        """Node indices of each delegated partition, subgraph by subgraph (see
        `partition_subgraphs`)."""
        return [list(p) for p in self._native.partitions()]

    def partition_subgraphs(self) -> list[int]:
        """The subgraph of each of `partitions()`."""
        return list(self._native.partition_subgraphs())

    def stats(self) -> DelegateStats:
        return self._native.stats()

    def profile(self) -> Profile:
        """Kernel and transfer timings so far (needs load(profiling=True))."""
        return Profile(self._native.profile())

    def reset_profile(self) -> None:
        self._native.reset_profile()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """With cpu_warmup (the default): wait until no partition is still building its
        programs (the next invoke then runs on the device; time the steady state after it);
        False if `timeout` seconds passed first."""
        return self._native.wait_ready(-1.0 if timeout is None else max(float(timeout), 0.0))

    def memory(self) -> MemoryReport:
        """Device memory of the delegate's live partitions (see `MemoryReport`)."""
        return self._native.memory()

    def captured(self) -> dict[int, npt.NDArray[np.float32]]:
        """Activations of the last invoke by tensor index (needs capture_tensors=True)."""
        return dict(self._native.captured())

    def abi(self) -> AbiObservation:
        """What the delegate observed of the host runtime's ABI at the last Prepare."""
        return self._native.abi()

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"clgpu_delegate.Delegate({opts})"


def load(
    *,
    device: str | int = "auto",
    precision: str = "fp32",
    max_delegated_partitions: int = 0,
    profiling: bool = False,
    partitioning: str | None = None,
    model: str | os.PathLike[str] | bytes | None = None,
    **advanced: Any,
) -> Delegate:
    """Create a delegate for `Interpreter(..., experimental_delegates=[delegate])`.

    device: "auto" (fastest GPU, else any OpenCL device), "gpu", "cpu", an index or a
    name substring. precision: "fp32". max_delegated_partitions: 0 = no limit.
    partitioning: "cost" (default; $CLGPU_PARTITIONING changes it) leaves on the CPU the
    partitions a cost model says would not win; "all" claims every supported node;
    "none" claims nothing; "measure" times the candidate plans on `model` (a path or the
    flatbuffer's bytes) with `plan()` and loads the fastest, stored in `serialization_dir`
    (when given) for the next load.
    Unknown options or values raise ValueError; a missing device raises NoDeviceError.
    """
    options: dict[str, Any] = {
        "device": device,
        "precision": precision,
        "max_delegated_partitions": max_delegated_partitions,
        "profiling": profiling,
        **advanced,
    }
    # None is "not given": str(None) would be the value "None" (a directory of that name).
    options = {k: v for k, v in options.items() if v is not None}
    if isinstance(options.get("serialization_dir"), (str, os.PathLike)):
        # '~' as Python paths take it; the delegate makes only the last directory (README).
        options["serialization_dir"] = os.path.expanduser(options["serialization_dir"])
    sd = options.get("serialization_dir")
    if sd is not None and not isinstance(sd, (str, os.PathLike)):
        raise ValueError(
            "option 'serialization_dir' must be a path (str or os.PathLike), not "
            + type(sd).__name__
        )
    if partitioning not in (None, "cost", "all", "none", "measure"):
        raise ValueError(
            f"invalid value {ascii(partitioning)[:66]} for option 'partitioning'; valid values: "
            "cost, all, none, measure (measure needs model=...)"
        )
    if partitioning == "measure":
        if model is None:
            raise ValueError(
                "partitioning='measure' needs model=... (the .tflite path or bytes) to time on"
            )
        from .planning import plan

        if max_delegated_partitions:
            raise ValueError("partitioning='measure' chooses max_delegated_partitions itself")
        options.pop("max_delegated_partitions")
        return Delegate(plan(model, **options).options)
    if model is not None:
        raise ValueError("model= is only used with partitioning='measure'")
    if partitioning is not None:
        options["partitioning"] = partitioning
    return Delegate(options)


def plugin_path() -> str:
    """Path of the Python-free plugin library, for `load_delegate(path, {...})` and
    `benchmark_model --external_delegate_path`."""
    env = os.environ.get("CLGPU_PLUGIN_PATH")
    path = Path(env) if env else Path(__file__).resolve().parent / _PLUGIN_NAME
    shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:100]}... ({len(str(path))} chars)"
    try:
        exists = path.is_file()
    except (OSError, ValueError) as e:  # too long, or a NUL: no path at all
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise FileNotFoundError(
            f"CLGPU_PLUGIN_PATH {ascii(shown)} is no usable path: {why}"
        ) from None
    if not exists:
        where = "CLGPU_PLUGIN_PATH " + ascii(shown) if env else shown
        raise FileNotFoundError(
            f"{where} is not a file: the package was built without the plugin "
            "(CMake option CLGPU_BUILD_PLUGIN=ON builds it)"
        )
    return str(path)
