"""Mutations that rewrite a model through modelgen's reader and writer (the edits of mutate.py
that cannot be made in place): constant data given to a tensor an operator writes (TFLite's CPU
ignores it, so must the delegate), and another rank or shape for a constant operand such as a
bias, a SPLIT_V size_splits, a RESIZE size or a PAD paddings (a DEPTHWISE_CONV_2D bias of rank
2, size_splits [2, 1]: what the CPU's kernels refuse the delegate must not run).

Works on single-subgraph models of the types modelgen writes; on others it returns None and
mutate.py falls back to its in-place edits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from clgpu_delegate.modelgen._reader import ModelRecords, read_model
from clgpu_delegate.modelgen.flatbuffer import write_model

MAX_ELEMENTS = 1 << 20  # larger tensors are not given data (the mutant would be slow to write)
SPECIALS = (np.nan, np.inf, -np.inf, 3e38, -3e38, 0.0, 1e4)


def _records(model: bytes) -> ModelRecords | None:
    try:
        return read_model(model)
    except Exception:  # noqa: BLE001 - a model the reader cannot take gets the in-place edits
        return None


def _write(r: ModelRecords) -> bytes | None:
    try:
        return write_model(r.tensors, r.ops, r.inputs, r.outputs)
    except Exception:  # noqa: BLE001 - data the writer refuses (an unknown dtype, too large)
        return None


def _payload(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Data for a tensor: random values, one special value everywhere or scattered, and one
    time in five a wrong element count."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    kind = np.dtype(dtype).kind
    if kind == "f":
        x = rng.standard_normal(n) * float(rng.choice((1.0, 1e3)))
        if rng.integers(3) == 0:
            x[rng.integers(0, 2, n) == 1] = float(rng.choice(SPECIALS))
    elif kind == "b":
        x = rng.integers(0, 2, n)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, n)
    x = x.astype(dtype)
    if rng.integers(5) == 0:
        return np.resize(x, max(0, n + int(rng.choice((-1, 1, n)))))
    return x.reshape(shape)


def _produced_data(r: ModelRecords, rng: np.random.Generator) -> str | None:
    written = sorted({t for op in r.ops for t in op.outputs if 0 <= t < len(r.tensors)})
    small = [t for t in written if np.prod(r.tensors[t].shape, dtype=np.int64) <= MAX_ELEMENTS]
    if not small:
        return None
    t = int(rng.choice(small))
    tensor = r.tensors[t]
    tensor.data = _payload(rng, tuple(tensor.shape), tensor.dtype)
    return f"produced tensor {t} {tensor.shape} given {tensor.data.size} values"


def _new_shape(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    choices: list[tuple[int, ...]] = [(*shape, 1), (1, *shape), (n,), (1, 1, 1, n)]
    if n == 1:
        choices.append(())
    if n % 2 == 0 and n > 1:
        choices += [(2, n // 2), (n // 2, 2)]
    if shape:
        choices += [(*shape[:-1], shape[-1] + 1), (*shape[:-1], max(shape[-1] - 1, 0))]
    return tuple(choices[int(rng.integers(len(choices)))])


def _operand_shape(r: ModelRecords, rng: np.random.Generator) -> str | None:
    """A constant operand other than an op's data input (bias, sizes, axes, paddings, filter)
    gets another rank or shape; its data is reshaped, or cut or repeated to the new count."""
    sites = [
        (i, k, t)
        for i, op in enumerate(r.ops)
        for k, t in enumerate(op.inputs)
        if 0 <= t < len(r.tensors)
        and r.tensors[t].data is not None
        and (k > 0 or len(op.inputs) > 3)
    ]
    if not sites:
        return None
    i, k, t = sites[int(rng.integers(len(sites)))]
    tensor = r.tensors[t]
    old = tuple(tensor.shape)
    new = _new_shape(rng, old)
    assert tensor.data is not None
    tensor.data = np.resize(tensor.data.ravel(), int(np.prod(new, dtype=np.int64))).reshape(new)
    tensor.shape = new
    return f"operand {k} of op {i} (tensor {t}) shape {list(old)} -> {list(new)}"


RecordEdit = Callable[[ModelRecords, np.random.Generator], "str | None"]
RECORD_EDITS: dict[str, RecordEdit] = {
    "produced_data": _produced_data,
    "operand_shape": _operand_shape,
}


def rewrite(model: bytes, name: str, rng: np.random.Generator) -> tuple[bytes, str] | None:
    """The model with RECORD_EDITS[name] applied, and what was done; None where the edit has no
    site or the model cannot be read or written back."""
    r = _records(model)
    if r is None:
        return None
    what = RECORD_EDITS[name](r, rng)
    if what is None:
        return None
    out = _write(r)
    return None if out is None else (out, what)
