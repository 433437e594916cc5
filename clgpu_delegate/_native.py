"""Access to the compiled extension with a clear message when it is missing.

`native` is the `_core` module (typed by `_core.pyi`); when the extension cannot be loaded,
it is a stand-in whose every attribute raises NativeExtensionMissing, so the package still
imports for --help, docs and the model builder.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from ._errors import NativeExtensionMissing

__all__ = ["core", "native"]


class _Missing:
    def __init__(self, error: ImportError) -> None:
        self._error = error

    def missing(self) -> NativeExtensionMissing:
        e = NativeExtensionMissing(
            "clgpu_delegate's compiled extension (_core) is not available: "
            f"{self._error}. Build and install the package with `pip install .` from the "
            "source tree (needs a C++17 compiler, CMake and the OpenCL headers: "
            "apt-get install opencl-headers)."
        )
        e.__cause__ = self._error
        return e

    def __getattr__(self, name: str) -> object:
        raise self.missing()


if TYPE_CHECKING:
    from . import _core as native
else:
    try:
        from . import _core as native
    except ImportError as e:
        native = _Missing(e)


def core() -> types.ModuleType:
    """The `_core` extension, or NativeExtensionMissing saying how to build it."""
    if isinstance(native, _Missing):
        raise native.missing()
    return native
