"""OpenCL device discovery and selection."""

from __future__ import annotations

import threading

from ._native import native
from .results import Device

__all__ = ["Device", "WarmUp", "devices", "select_device", "warm_up"]


def devices(probe_fp16: bool = True) -> list[Device]:
    """Every OpenCL device of every platform (empty if there is no platform).

    Raises NoDeviceError if no OpenCL library can be loaded at all.
    """
    return native.devices(probe_fp16)


def select_device(spec: str | int = "auto") -> Device:
    """The device `load(device=spec)` would use; NoDeviceError if none matches."""
    return native.select_device(str(spec))


class WarmUp:
    """The OpenCL driver being started in the background by `warm_up()`."""

    def __init__(self, device: str) -> None:
        self.ms: float | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(device,), name="clgpu-warm-up", daemon=False
        )
        self._thread.start()

    def _run(self, device: str) -> None:
        try:
            self.ms = native.warm_up(device)
        except Exception as e:  # load() raises its own clear error; keep it for wait()
            self.error = e

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> float | None:
        """Milliseconds the start took (None if not finished or failed: see `error`)."""
        self._thread.join(timeout)
        return self.ms


def warm_up(device: str | int = "auto", background: bool = True) -> WarmUp | float:
    """Start the OpenCL driver for `load(device=device)` ahead of time.

    A process's first delegate otherwise waits for the driver to list its devices and
    create a context, before any work of ours (the "driver setup" column of
    bench/results/models-*.md).
    Called early (e.g. before importing the TFLite runtime and reading the model), that
    time overlaps with the application's own start. The context (with the programs
    delegates build in it) is then kept for the process, so delegates created later, even
    after earlier ones are gone, skip that setup and reuse the programs; without warm_up()
    the last delegate to go releases them. With background=False it runs here and returns
    the milliseconds it took (raising NoDeviceError like load()).
    As with any OpenCL use, do not fork the process afterwards and use OpenCL in the child.
    """
    if background:
        return WarmUp(str(device))
    return float(native.warm_up(str(device)))


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def format_table(devs: list[Device]) -> str:
    """A plain-text table of devices (the `devices` command)."""
    head = [
        "#",
        "type",
        "name",
        "arch",
        "platform",
        "OpenCL",
        "driver",
        "CUs",
        "MHz",
        "global",
        "local",
        "max alloc",
        "unified",
        "fp16",
        "int8",
    ]
    rows = [
        [
            str(d.index),
            d.type,
            d.name,
            d.architecture or "-",
            d.platform,
            d.opencl_version,
            d.driver_version,
            str(d.compute_units),
            str(d.max_clock_mhz) if d.max_clock_mhz > 0 else "-",  # some drivers report none
            _gib(d.global_mem_bytes),
            f"{d.local_mem_bytes // 1024} KiB",
            _gib(d.max_alloc_bytes),
            "yes" if d.host_unified_memory else "no",
            ("yes" if d.fp16 else "no") + ("" if d.fp16 == d.fp16_advertised else " (probed)"),
            d.int8_dot or "-",
        ]
        for d in devs
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    # The two probed columns are ours, not OpenCL's terms: say what their words mean.
    lines.append(
        "fp16: half-precision arithmetic; '(probed)': a compile test found it where the "
        "driver does not advertise cl_khr_fp16 (NVIDIA), or the reverse"
    )
    lines.append(
        "int8: the int8 kernels' dot product: dp4a (NVIDIA's instruction), khr "
        "(cl_khr_integer_dot_product), portable (plain OpenCL C multiply-adds, correct on any "
        "device, slower); - not probed (--no-probe)"
    )
    return "\n".join(lines)
