"""Mutations of a .tflite flatbuffer, in place: bit flips and truncation anywhere, and edits of
the fields a model's meaning rests on, found through the schema (the `tflite` package): operator
input/output indices and opcode indices, tensor shapes, builtin option scalars and the lengths of
constant buffers; and, through records.py, constant data for tensors that operators write and
other ranks or shapes for constant operands. A structural edit keeps the file a valid
flatbuffer, so it reaches the interpreter's and the delegate's checks instead of the verifier's;
works on any model, generated or converted.

    sites = Sites(model)              # where each kind of edit can go
    mutant, what = mutate(model, rng) # one to three edits; `what` says which
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tflite
from flatbuffers.number_types import UOffsetTFlags
from flatbuffers.table import Table
from records import RECORD_EDITS, rewrite

# Values an edited integer takes: edges of the types and of the shapes TFLite accepts.
INTERESTING_INTS = (
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    255,
    256,
    32767,
    32768,
    65535,
    1 << 20,
    1 << 24,
    (1 << 31) - 1,
    -1,
    -2,
    -(1 << 31),
)
INTERESTING_FLOATS = (
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-40,
    65504.0,
    1e5,
    3.4e38,
    -3.4e38,
    float("inf"),
    float("-inf"),
    float("nan"),
)


@dataclass
class Sites:
    """Byte offsets of the editable fields of a model (first subgraph only)."""

    model: bytes
    op_tensors: list[int] = field(default_factory=list)  # int32 operator input/output indices
    opcodes: list[int] = field(default_factory=list)  # uint32 operator opcode indices
    shape_dims: list[int] = field(default_factory=list)  # int32 tensor shape entries
    options: list[tuple[int, int]] = field(default_factory=list)  # (offset, bytes) option fields
    buffer_lengths: list[tuple[int, int]] = field(default_factory=list)  # (offset, length)
    tensors: int = 0

    def __post_init__(self) -> None:
        # A model the schema cannot walk has no sites (its mutants are bit flips).
        with contextlib.suppress(Exception):
            self._scan(bytearray(self.model))

    def _scan(self, buf: bytearray) -> None:
        m = tflite.Model.GetRootAsModel(buf, 0)
        if not m.SubgraphsLength():
            return
        sg = m.Subgraphs(0)
        self.tensors = sg.TensorsLength()
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            for vt in (6, 8):  # inputs, outputs
                self.op_tensors += _vector(op._tab, vt, 4)
            if (o := op._tab.Offset(4)) != 0:  # opcode_index
                self.opcodes.append(op._tab.Pos + o)
            if (opts := op.BuiltinOptions()) is not None:
                self.options += _table_fields(buf, opts.Pos)
        for i in range(self.tensors):
            self.shape_dims += _vector(sg.Tensors(i)._tab, 4, 4)
        for i in range(m.BuffersLength()):
            b = m.Buffers(i)._tab
            if (o := b.Offset(4)) != 0:
                start = b.Vector(UOffsetTFlags.py_type(o))
                n = b.VectorLen(UOffsetTFlags.py_type(o))
                if n:
                    self.buffer_lengths.append((start - 4, n))


def _vector(tab: Table, vt: int, size: int) -> list[int]:
    """Offsets of the elements of a vector field."""
    o = tab.Offset(vt)
    if o == 0:
        return []
    start = tab.Vector(UOffsetTFlags.py_type(o))
    return [start + size * j for j in range(tab.VectorLen(UOffsetTFlags.py_type(o)))]


def _table_fields(buf: bytearray, pos: int) -> list[tuple[int, int]]:
    """(offset, size) of the scalar-looking fields present in a table: size from the distance
    to the next field, at most 4 (a longer field is an offset, edited as an int too)."""
    vtable = pos - struct.unpack_from("<i", buf, pos)[0]
    vsize, tsize = struct.unpack_from("<HH", buf, vtable)
    offs = sorted(o for o in struct.unpack_from(f"<{(vsize - 4) // 2}H", buf, vtable + 4) if o != 0)
    out = []
    for k, o in enumerate(offs):
        end = offs[k + 1] if k + 1 < len(offs) else tsize
        out.append((pos + o, max(1, min(4, end - o))))
    return out


def _int_value(rng: np.random.Generator, old: int, limit: int) -> int:
    pick = rng.integers(4)
    if pick == 0:
        return int(rng.integers(-1, max(limit, 1) + 2))
    if pick == 1:
        return old + int(rng.choice((-2, -1, 1, 2)))
    return int(rng.choice(INTERESTING_INTS))


Edit = Callable[[bytearray, Sites, np.random.Generator], str]


def _flip(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    flips = int(rng.integers(1, 5))
    for _ in range(flips):
        i = int(rng.integers(len(buf)))
        buf[i] ^= 1 << int(rng.integers(8))
    return f"bit flips x{flips}"


def _rewire(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    if not s.op_tensors:
        return _flip(buf, s, rng)
    at = int(rng.choice(s.op_tensors))
    old = struct.unpack_from("<i", buf, at)[0]
    new = _int_value(rng, old, s.tensors)
    struct.pack_into("<i", buf, at, new)
    return f"operator tensor index {old} -> {new} @{at}"


def _opcode(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    if not s.opcodes:
        return _flip(buf, s, rng)
    at = int(rng.choice(s.opcodes))
    old = struct.unpack_from("<I", buf, at)[0]
    new = int(rng.integers(0, old + 3))
    struct.pack_into("<I", buf, at, new)
    return f"opcode index {old} -> {new} @{at}"


def _shape(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    if not s.shape_dims:
        return _flip(buf, s, rng)
    at = int(rng.choice(s.shape_dims))
    old = struct.unpack_from("<i", buf, at)[0]
    new = _int_value(rng, old, 2 * max(old, 1))
    struct.pack_into("<i", buf, at, new)
    return f"shape dim {old} -> {new} @{at}"


def _option(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    if not s.options:
        return _flip(buf, s, rng)
    at, size = s.options[int(rng.integers(len(s.options)))]
    if size == 4 and rng.integers(3) == 0:
        v = float(rng.choice(INTERESTING_FLOATS))
        struct.pack_into("<f", buf, at, v)
        return f"option float -> {v} @{at}"
    fmt = {1: "<b", 2: "<h", 3: "<h", 4: "<i"}[size]
    old = struct.unpack_from(fmt, buf, at)[0]
    bits = 8 * struct.calcsize(fmt)
    new = _int_value(rng, old, 8)
    new = (new + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # wrap into the field
    struct.pack_into(fmt, buf, at, new)
    return f"option {old} -> {new} @{at}"


def _buffer_length(buf: bytearray, s: Sites, rng: np.random.Generator) -> str:
    if not s.buffer_lengths:
        return _flip(buf, s, rng)
    at, n = s.buffer_lengths[int(rng.integers(len(s.buffer_lengths)))]
    new = int(rng.choice((0, 1, n // 2, n - 1, n - 4, n + 1, n + 4, 2 * n)))
    struct.pack_into("<I", buf, at, max(new, 0))
    return f"buffer length {n} -> {new} @{at}"


EDITS: dict[str, Edit] = {
    "flip": _flip,
    "rewire": _rewire,
    "opcode": _opcode,
    "shape": _shape,
    "option": _option,
    "buffer_length": _buffer_length,
}


def mutate(model: bytes, rng: np.random.Generator, sites: Sites | None = None) -> tuple[bytes, str]:
    """One mutant of `model`: truncated (1 in 12), or one to three edits of EDITS and
    RECORD_EDITS (records.py: those rewrite the model, so they go first)."""
    if rng.integers(12) == 0:
        n = int(rng.integers(0, len(model)))
        return model[:n], f"truncated to {n} of {len(model)} bytes"
    kinds = list(EDITS) + list(RECORD_EDITS)
    names = [str(rng.choice(kinds)) for _ in range(int(rng.choice((1, 1, 1, 2, 3))))]
    done = []
    for name in sorted(n for n in names if n in RECORD_EDITS):
        if (rewritten := rewrite(model, name, rng)) is not None:
            model, what = rewritten
            done.append(what)
            sites = None
    if sites is None or sites.model is not model:
        sites = Sites(model)
    buf = bytearray(model)
    for name in names:
        if name in EDITS:
            done.append(EDITS[name](buf, sites, rng))
    if not done:  # a record edit without a site: a bit flip instead
        done.append(_flip(buf, sites, rng))
    return bytes(buf), "; ".join(done)
