"""Exception types raised by clgpu_delegate (the native core raises these too)."""


class ClgpuError(RuntimeError):
    """Base class of the delegate's runtime errors."""


class NoDeviceError(ClgpuError):
    """No OpenCL library, platform or matching device; the message says what to install."""


class OpenCLError(ClgpuError):
    """An OpenCL call failed; the message names the call and the OpenCL error."""


class BuildError(OpenCLError):
    """An OpenCL program failed to compile; the message holds the build log and options."""


class NativeExtensionMissing(ImportError):
    """The compiled extension clgpu_delegate._core is not built or cannot be loaded."""


class MissingExtraError(ImportError):
    """A feature's optional dependencies are not installed; the message names the extra."""


def require_extra(extra: str, feature: str, *modules: str) -> None:
    """Raise MissingExtraError unless `modules` import (the dependencies of `extra`)."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise MissingExtraError(
                f"{feature} needs {name!r}, from the [{extra}] extra: "
                f"pip install 'clgpu-delegate[{extra}]'"
            ) from None


class InvalidModelError(ValueError):
    """A model file or buffer is not a sound TFLite flatbuffer; the message says where."""
