"""Access to the compiled extension with a clear message when it is missing."""

from __future__ import annotations

import types

from ._errors import NativeExtensionMissing

_core: types.ModuleType | None = None
_import_error: BaseException | None = None

try:
    from . import _core  # type: ignore[attr-defined, no-redef]
except ImportError as e:  # keep the package importable for --help, docs, the model builder
    _import_error = e


def core() -> types.ModuleType:
    """The `_core` extension, or NativeExtensionMissing saying how to build it."""
    if _core is None:
        raise NativeExtensionMissing(
            "clgpu_delegate's compiled extension (_core) is not available: "
            f"{_import_error}. Build and install the package with `pip install .` from the "
            "source tree (needs a C++17 compiler, CMake and the OpenCL headers: "
            "apt-get install opencl-headers)."
        ) from _import_error
    return _core
