"""The command line's checks, made before any work: argument types, the model (a verified
.tflite file or a built-in name), the runtime, output paths and delegate option keys. Each
failure is one UsageError (or InvalidModelError / MissingExtraError) line saying what to do."""

from __future__ import annotations

import argparse
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._errors import InvalidModelError, require_extra

MODEL_EXTRA = ("tflite", "flatbuffers")


class UsageError(ValueError):
    """A bad argument, found before any work."""


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE (a delegate option, e.g. -o zero_copy=off), got {text!r}"
        )
    return key.strip(), value.strip()


def zoo_models() -> dict[str, Callable[..., bytes]]:
    """The built-in models, or {} without the [models] extra (the help says so)."""
    try:
        from .modelgen import zoo
    except ImportError:
        return {}
    return zoo.MODELS


def describe(fn: Callable[..., bytes]) -> tuple[int, str]:
    size = inspect.signature(fn).parameters["size"].default
    return int(size), (fn.__doc__ or "").split(":")[0].strip()


def check_output(path: str | None, flag: str) -> None:
    if path is None:
        return
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {path}: cannot write in {parent}; choose another path")


def resolve_model(arg: str | None, name: str | None, size: int | None) -> str:
    """The .tflite path (checked and verified) or the built-in model name to run."""
    from .bench import DEFAULT_MODEL, looks_like_path
    from .modelfile import verify_model

    if arg is not None and name is not None:
        raise UsageError(f"give a .tflite file or --model, not both ({arg!r}, --model {name})")
    model = arg if arg is not None else (name or DEFAULT_MODEL)
    if arg is None or (not looks_like_path(arg) and not Path(arg).exists()):
        require_extra("models", "the built-in models", *MODEL_EXTRA)
        if model not in zoo_models():
            raise UsageError(
                f"unknown model {model!r}: neither a .tflite file nor a built-in model "
                "(`clgpu-delegate models` lists those)"
            )
        return model
    if size is not None:
        raise UsageError("--size applies to built-in models only, not to a .tflite file")
    path = Path(arg)
    if not path.exists():
        raise UsageError(
            f"model file not found: {arg}; give a .tflite file, or a built-in model "
            "(`clgpu-delegate models` lists them)"
        )
    if not path.is_file():
        raise UsageError(f"{arg} is not a file; give a .tflite file")
    try:
        verify_model(path)
    except InvalidModelError as e:
        raise InvalidModelError(f"{e}; re-export or re-download it") from None
    return str(path)


def check_runtime(runtime: str | None) -> None:
    from .runtime import available_runtimes

    found = available_runtimes()
    if runtime is not None and runtime not in found:
        pip = runtime.replace("_", "-")
        raise UsageError(
            f"--runtime {runtime}: {runtime} is not installed here (pip install {pip}); "
            f"installed: {', '.join(found) or 'none'}"
        )
    if not found:
        raise UsageError(
            "no TFLite interpreter is installed: pip install tflite-runtime (Python <= 3.11) "
            "or ai-edge-litert"
        )


def delegate_options(pairs: list[tuple[str, str]], flags: tuple[str, ...]) -> dict[str, Any]:
    from ._native import core

    keys = core().option_keys()
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in flags:
            raise UsageError(f"-o {key}={value}: use --{key} {value} instead")
        if key not in keys:
            raise UsageError(
                f"-o {key}={value}: unknown delegate option {key!r}; valid: {', '.join(keys)}"
            )
        out[key] = value
    return out
