"""Which TFLite interpreter package to use: tflite_runtime (Python <= 3.11) or
ai_edge_litert (3.11 and 3.12+). `CLGPU_RUNTIME` picks one explicitly."""

from __future__ import annotations

import importlib
import math
import os
import re
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


# Input shapes given by name: {"serving_default_input:0": (1, 1280)}; "" names a model's only
# input.
InputShapes = dict[str, tuple[int, ...]]
# An input this large is a typo (--input-shape 1,1280000000), not a model: TFLite would fail
# deep in its arena with a message that names no input.
_MAX_INPUT_ELEMENTS = 1 << 28


def random_inputs(details: list[dict[str, Any]], seed: int = 0) -> list[Any]:
    """Seeded inputs for a model's input details, valid for any model: N(0, 1) for float inputs,
    small integers for the others (0 to 4 for int32 / int64 ones, which are token ids, indices and
    masks that EMBEDDING_LOOKUP and GATHER refuse below 0; -4 to 4 for quantized ones). One rule
    for the benchmark, plan timing and check_precision."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            out.append(rng.standard_normal(shape).astype(dtype))
        else:
            low = 0 if dtype in (np.int32, np.int64) else -4
            out.append(rng.integers(low, 5, size=shape).astype(dtype))
    return out


def _fill_shapes(details: list[dict[str, Any]], shapes: InputShapes) -> dict[int, tuple[int, ...]]:
    """{tensor index: shape} for `shapes`, checked against the inputs' signatures."""
    names = [d["name"] for d in details]
    out: dict[int, tuple[int, ...]] = {}
    for name, shape in shapes.items():
        if name == "" and len(details) == 1:
            name = names[0]
        if name not in names:
            listed = ", ".join(names)
            raise ValueError(
                f"input shape for {name or '(unnamed)'!r}: the model's inputs are {listed}; "
                "name one (NAME:1,1280)"
            )
        d = details[names.index(name)]
        sig = [int(s) for s in d.get("shape_signature", d["shape"])]
        # TFLite resizes any input to any shape and its prepare judges the result; a rank
        # other than the model's is a typo.
        if len(shape) != len(sig):
            raise ValueError(
                f"input {name!r}: shape {list(shape)} has rank {len(shape)}, the model's input "
                f"{sig} rank {len(sig)} (-1: a dynamic dimension)"
            )
        if any(g < 1 for g in shape) or math.prod(shape) > _MAX_INPUT_ELEMENTS:
            raise ValueError(
                f"input {name!r}: shape {list(shape)}: every dimension must be at least 1 and "
                f"the input at most {_MAX_INPUT_ELEMENTS} elements"
            )
        out[int(d["index"])] = tuple(shape)
    return out


def allocate(interp: Any, shapes: InputShapes | None = None) -> None:
    """Resize the inputs to `shapes`, then allocate_tensors(). A model that TFLite cannot
    prepare at those shapes (or, with none given, at its declared ones: a dynamic dimension
    reads 1 there) raises ValueError in one line that says so and names its dynamic inputs."""
    details = interp.get_input_details()
    for index, shape in _fill_shapes(details, shapes or {}).items():
        interp.resize_tensor_input(index, list(shape))
    try:
        interp.allocate_tensors()
    except RuntimeError as e:
        # TFLite's message: "<file> <what>\nNode number N (OP) failed to prepare...".
        text = " ".join(str(e).split())
        node = re.search(r"Node number \d+ \(\w+\) failed to prepare", text)
        what = text.split(" Node number")[0].split(" ", 1)[-1].rstrip(".")
        why = f"{node.group(0).replace('Node number', 'node')}: {what}" if node else text[:200]
        dynamic = [
            f"{d['name']}:{','.join('N' if s == -1 else str(s) for s in d['shape_signature'])}"
            for d in details
            if -1 in list(d.get("shape_signature", []))
        ]
        at = "the given input shapes" if shapes else "its declared input shapes"
        hint = (
            f"; give the inputs' shapes (--input-shape {' --input-shape '.join(dynamic)}, N a "
            "size the model was made for)"
            if dynamic
            else ""
        )
        raise ValueError(f"the model cannot run at {at} ({why}){hint}") from None
