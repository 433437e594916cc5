"""What the scenarios run by shim_scenarios.py share, in the child process only: the shim's
controls (it is the OpenCL library the delegate loaded through CLGPU_OPENCL_LIBRARY), outcomes as
text, stderr as text, delegates through either entry point, and outputs checked against the CPU.
"""

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from parity import random_inputs, run

import clgpu_delegate
from clgpu_delegate.runtime import interpreter_module, make_interpreter
from faults.helpers import KINDS  # tests/ is on the child's PYTHONPATH

RT = sys.argv[1]
shim = ctypes.CDLL(os.environ["CLGPU_OPENCL_LIBRARY"])
shim.clgpu_shim_fail.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_long, ctypes.c_int]

# OpenCL error codes the scenarios inject.
CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY, CL_MEM_OBJECT_ALLOCATION_FAILURE = -5, -6, -4
CL_BUILD_PROGRAM_FAILURE = -11


def arm(name: str, skip: int = 0, times: int = 1, err: int = CL_OUT_OF_RESOURCES) -> None:
    """The next `times` calls of `name` (-1: every one) after `skip` good ones fail with `err`."""
    shim.clgpu_shim_fail(name.encode(), skip, times, err)


def disarm() -> None:
    shim.clgpu_shim_fail(b"", 0, 0, 0)


def live() -> dict[str, int]:
    """The OpenCL objects (and mappings) alive now, by kind."""
    a = (ctypes.c_long * (2 * len(KINDS)))()
    shim.clgpu_shim_counts(a)
    return {k: a[i] - a[len(KINDS) + i] for i, k in enumerate(KINDS)}


def outcome(f: Callable[[], Any]) -> str:
    try:
        f()
        return "ok"
    except Exception as e:
        return "raised " + type(e).__name__ + ": " + str(e)[:600]


@contextlib.contextmanager
def stderr_into(out: list[str]) -> Iterator[None]:
    """Appends what this process (its native code included) writes to fd 2 meanwhile to `out`;
    the text is written on afterwards, so a crash report still shows it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text = f.read().decode(errors="replace")
            out.append(text)
            sys.stderr.write(text)


def make_delegate(entry: str = "load", **options: Any) -> Any:
    """A delegate made by clgpu_delegate.load() or by the runtime's load_delegate (the plugin)."""
    if entry == "load":
        return clgpu_delegate.load(**options)
    return interpreter_module(RT).load_delegate(
        clgpu_delegate.plugin_path(), {k: str(v) for k, v in options.items()}
    )


def interpreter(model: bytes, delegates: list[Any] | None, **kw: Any) -> Any:
    return make_interpreter(model, delegates, runtime=RT, reference=True, **kw)


_references: dict[tuple[bytes, int, int | None], Any] = {}


def reference(
    model: bytes, seed: int, threads: int | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) of `model` on stock TFLite, seeded as parity.random_inputs."""
    key = (model, seed, threads)
    if key not in _references:
        ref = interpreter(model, None, num_threads=threads)
        ref.allocate_tensors()
        inputs = random_inputs(ref.get_input_details(), seed)
        _references[key] = inputs, run(ref, inputs)
    return _references[key]


def check(
    it: Any, model: bytes, seed: int = 0, exact: bool = False, threads: int | None = None
) -> None:
    """Invokes `it` on the seed's inputs; raises unless the outputs are the reference's
    (`exact`: bit for bit, as TFLite's own kernels on as many threads give them)."""
    inputs, want = reference(model, seed, threads)
    for got, w in zip(run(it, inputs), want, strict=True):
        same = np.array_equal(got, w) if exact else np.allclose(got, w, rtol=1e-4, atol=1e-5)
        if not same:
            raise AssertionError("WRONG OUTPUT")


def ops(it: Any) -> list[str]:
    return [op["op_name"] for op in it._get_ops_details()]
