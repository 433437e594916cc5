"""Which TFLite interpreter package to use: tflite_runtime (Python <= 3.11) or
ai_edge_litert (3.11 and 3.12+). `CLGPU_RUNTIME` picks one explicitly."""

from __future__ import annotations

import importlib
import os
from typing import Any

from .modelfile import verify_model

RUNTIMES = ("tflite_runtime", "ai_edge_litert")


def available_runtimes() -> list[str]:
    """Runtimes importable here, in preference order."""
    out = []
    for name in RUNTIMES:
        try:
            importlib.import_module(f"{name}.interpreter")
        except ImportError:
            continue
        out.append(name)
    return out


def resolve_runtime(runtime: str | None = None) -> str:
    """The runtime `interpreter_module(runtime)` uses: `runtime`, else $CLGPU_RUNTIME, else
    the first available one."""
    name = runtime or os.environ.get("CLGPU_RUNTIME") or None
    if name is None:
        found = available_runtimes()
        if not found:
            raise ImportError(
                "no TFLite interpreter package found: pip install tflite-runtime (Python <= 3.11) "
                "or ai-edge-litert"
            )
        name = found[0]
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; expected one of {', '.join(RUNTIMES)}")
    return name


def interpreter_module(runtime: str | None = None) -> Any:
    """The `interpreter` module of `runtime` (default: $CLGPU_RUNTIME, else the first available)."""
    return importlib.import_module(f"{resolve_runtime(runtime)}.interpreter")


def make_interpreter(
    model: str | bytes,
    delegates: list[Any] | None = None,
    runtime: str | None = None,
    num_threads: int | None = None,
    reference: bool = False,
    preserve_all_tensors: bool = False,
    verify: bool = True,
) -> Any:
    """An Interpreter for a model path or flatbuffer bytes.

    reference=True uses the builtin kernels without default delegates (no XNNPACK):
    the CPU reference the tests compare against. The model is verified first
    (`verify_model`): tflite_runtime reads a damaged flatbuffer past its end. verify=False
    hands it to the interpreter as it is (the fault tests: what a user's own Interpreter
    does with it, with and without the delegate).
    """
    if verify:
        verify_model(model)
    mod = interpreter_module(runtime)
    kwargs: dict[str, Any] = {"experimental_delegates": delegates or None}
    if isinstance(model, (bytes, bytearray)):
        kwargs["model_content"] = bytes(model)
    else:
        kwargs["model_path"] = str(model)
    if preserve_all_tensors:
        kwargs["experimental_preserve_all_tensors"] = True
    if num_threads is not None:
        kwargs["num_threads"] = num_threads
    if reference:
        kwargs["experimental_op_resolver_type"] = (
            mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
    return mod.Interpreter(**kwargs)
