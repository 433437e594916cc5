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


# More timed runs than this is a typo, not a benchmark (a million runs of a 0.03 ms model
# already take half a minute).
MAX_RUNS = 1_000_000
# A built-in model at more than this many times its default input size: activations grow with
# its square (pynet --size 20000 would need hundreds of GB).
MAX_SIZE_FACTOR = 4


def runs(text: str) -> int:
    value = positive(text)
    if value > MAX_RUNS:
        raise argparse.ArgumentTypeError(f"at most {MAX_RUNS:,} timed runs, got {text}")
    return value


def check_size(name: str, size: int | None) -> None:
    """A built-in model's --size within MAX_SIZE_FACTOR times its default."""
    fn = zoo_models().get(name)
    if size is None or fn is None:
        return
    default = describe(fn)[0]
    if size > MAX_SIZE_FACTOR * default:
        raise UsageError(
            f"--size {size}: at most {MAX_SIZE_FACTOR * default} for {name} "
            f"({MAX_SIZE_FACTOR}x its default {default}; its activations grow with the size "
            "squared)"
        )


def threads(value: int | None) -> int | None:
    """--threads, at most the host's cores: more only makes the CPU row's threads wait for
    each other. Warns on stderr when it lowers the count."""
    import sys

    cores = os.cpu_count() or 1
    if value is not None and value > cores:
        print(
            f"warning: --threads {value}: this machine has {cores} cores; using {cores}",
            file=sys.stderr,
        )
        return cores
    return value


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """NAME:1,1280 (the last ':' ends the name: TFLite names hold ':0'), or 1,1280 for a
    model's only input."""
    name, _, dims = text.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(
            f"expected NAME:D1,D2,... (positive sizes; NAME may be left out for a model's only "
            f"input), got {text!r}"
        )
    return name, shape


def input_shapes(pairs: list[tuple[str, tuple[int, ...]]]) -> dict[str, tuple[int, ...]] | None:
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in pairs:
        if name in out:
            raise UsageError(f"--input-shape {name or '(the only input)'}: given twice")
        out[name] = shape
    return out or None


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


def delegate_options(
    pairs: list[tuple[str, str]], flags: dict[str, tuple[str, ...] | None]
) -> dict[str, Any]:
    """-o KEY=VALUE pairs checked against the delegate's keys; `flags` maps the options that
    have a flag of their own to that flag's choices (None: any value)."""
    from ._native import core

    keys = core().option_keys()
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in flags:
            choices = flags[key]
            if choices is not None and value not in choices:  # suggest no flag that fails too
                raise UsageError(
                    f"-o {key}={value}: {value!r} is not a {key}; use --{key} "
                    f"{'|'.join(choices)} instead"
                )
            raise UsageError(f"-o {key}={value}: use --{key} {value} instead")
        if key not in keys:
            raise UsageError(
                f"-o {key}={value}: unknown delegate option {key!r}; valid: {', '.join(keys)}"
            )
        out[key] = value
    return out
