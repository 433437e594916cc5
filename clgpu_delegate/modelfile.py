"""Checks a .tflite file before an interpreter reads it.

tflite_runtime 2.14 does not verify the flatbuffer it is given: a truncated file makes it read
past the end and die with SIGSEGV, random bytes end in a UnicodeDecodeError. `verify_model()`
walks the buffer the way flatbuffers' own verifier does (every offset, vtable, vector and
string inside the buffer and aligned, strings NUL-terminated, bounded depth) over the parts
of the TFLite schema an interpreter reads, then checks the indices that tie them together
(operator codes, tensors, buffers). A file that passes cannot send the interpreter outside
its bytes; whatever else is wrong with it the interpreter reports itself.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

from ._errors import InvalidModelError
from ._tflite_options import BUILTIN_OPTIONS, BUILTIN_OPTIONS_2

_IDENTIFIER = b"TFL3"
_MAX_DEPTH = 64  # flatbuffers' Verifier defaults
_MAX_TABLES = 1_000_000

# Field kinds; a table's schema maps a field index to (name, kind, argument).
_SCALAR, _STRING, _TABLE, _VSCALAR, _VTABLE, _UNION = range(6)

_I32 = (_VSCALAR, 4)
_U8 = (_VSCALAR, 1)
_I64 = (_VSCALAR, 8)

# The TFLite schema (tensorflow/lite/schema/schema.fbs), as far as offsets go: tables and the
# fields that point elsewhere, with the options tables of _tflite_options.py. Fields of a newer
# schema are not read by a reader of this one, so they are not checked (flatbuffers' verifier
# skips them as well).
_Field = tuple[str, int, Any]
_SPARSE_INDEX = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}


def _s(name: str, size: int) -> _Field:
    return (name, _SCALAR, size)


def _v(name: str, kind: tuple[int, int]) -> _Field:
    return (name, kind[0], kind[1])


_CODES = {"B": _U8, "H": (_VSCALAR, 2), "I": _I32, "Q": _I64}
_OPTION_TABLES: dict[str, dict[int, _Field]] = {}


def _options(union: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Union value -> table name; each table's fields go into _OPTION_TABLES."""
    for name, codes in union.values():
        fields: dict[int, _Field] = {}
        for i, c in enumerate(codes):
            if c.isdigit():
                fields[i] = _s(f"f{i}", int(c))
            elif c == "s":
                fields[i] = (f"f{i}", _STRING, None)
            elif c in _CODES:
                fields[i] = _v(f"f{i}", _CODES[c])
        _OPTION_TABLES[name] = fields
    return {value: name for value, (name, _) in union.items()}


_TABLES: dict[str, dict[int, _Field]] = {
    "Model": {
        0: _s("version", 4),
        1: ("operator_codes", _VTABLE, "OperatorCode"),
        2: ("subgraphs", _VTABLE, "SubGraph"),
        3: ("description", _STRING, None),
        4: ("buffers", _VTABLE, "Buffer"),
        5: _v("metadata_buffer", _I32),
        6: ("metadata", _VTABLE, "Metadata"),
        7: ("signature_defs", _VTABLE, "SignatureDef"),
    },
    "OperatorCode": {
        0: _s("deprecated_builtin_code", 1),
        1: ("custom_code", _STRING, None),
        2: _s("version", 4),
        3: _s("builtin_code", 4),
    },
    "SubGraph": {
        0: ("tensors", _VTABLE, "Tensor"),
        1: _v("inputs", _I32),
        2: _v("outputs", _I32),
        3: ("operators", _VTABLE, "Operator"),
        4: ("name", _STRING, None),
        5: _s("debug_metadata_index", 4),
    },
    "Tensor": {
        0: _v("shape", _I32),
        1: _s("type", 1),
        2: _s("buffer", 4),
        3: ("name", _STRING, None),
        4: ("quantization", _TABLE, "QuantizationParameters"),
        5: _s("is_variable", 1),
        6: ("sparsity", _TABLE, "SparsityParameters"),
        7: _v("shape_signature", _I32),
        8: _s("has_rank", 1),
        9: ("variant_tensors", _VTABLE, "VariantSubType"),
    },
    "VariantSubType": {0: _v("shape", _I32), 1: _s("type", 1), 2: _s("has_rank", 1)},
    "QuantizationParameters": {
        0: _v("min", _I32),
        1: _v("max", _I32),
        2: _v("scale", _I32),
        3: _v("zero_point", _I64),
        4: _s("details_type", 1),
        5: ("details", _UNION, (4, {1: "CustomQuantization"})),
        6: _s("quantized_dimension", 4),
    },
    "CustomQuantization": {0: _v("custom", _U8)},
    "SparsityParameters": {
        0: _v("traversal_order", _I32),
        1: _v("block_map", _I32),
        2: ("dim_metadata", _VTABLE, "DimensionMetadata"),
    },
    "DimensionMetadata": {
        0: _s("format", 1),
        1: _s("dense_size", 4),
        2: _s("array_segments_type", 1),
        3: ("array_segments", _UNION, (2, _SPARSE_INDEX)),
        4: _s("array_indices_type", 1),
        5: ("array_indices", _UNION, (4, _SPARSE_INDEX)),
    },
    "Int32Vector": {0: _v("values", _I32)},
    "Uint16Vector": {0: _v("values", (_VSCALAR, 2))},
    "Uint8Vector": {0: _v("values", _U8)},
    "Operator": {
        0: _s("opcode_index", 4),
        1: _v("inputs", _I32),
        2: _v("outputs", _I32),
        3: _s("builtin_options_type", 1),
        4: ("builtin_options", _UNION, (3, _options(BUILTIN_OPTIONS))),
        5: _v("custom_options", _U8),
        6: _s("custom_options_format", 1),
        7: _v("mutating_variable_inputs", _U8),
        8: _v("intermediates", _I32),
        9: _s("large_custom_options_offset", 8),
        10: _s("large_custom_options_size", 8),
        11: _s("builtin_options_2_type", 1),
        12: ("builtin_options_2", _UNION, (11, _options(BUILTIN_OPTIONS_2))),
        13: _s("debug_metadata_index", 4),
    },
    "Buffer": {0: _v("data", _U8), 1: _s("offset", 8), 2: _s("size", 8)},
    "Metadata": {0: ("name", _STRING, None), 1: _s("buffer", 4)},
    "SignatureDef": {
        0: ("inputs", _VTABLE, "TensorMap"),
        1: ("outputs", _VTABLE, "TensorMap"),
        2: ("signature_key", _STRING, None),
        4: _s("subgraph_index", 4),
    },
    "TensorMap": {0: ("name", _STRING, None), 1: _s("tensor_index", 4)},
    **_OPTION_TABLES,
}


class _Walk:
    """One verification pass over a buffer (bytes, or a read-only mmap of the file)."""

    def __init__(self, buf: Any, label: str) -> None:
        self.buf = buf
        self.n = len(buf)
        self.label = label
        self.tables = 0

    def fail(self, where: str, what: str) -> InvalidModelError:
        return InvalidModelError(
            f"{self.label} is not a valid TFLite model (damaged or truncated?): {where} {what}"
        )

    def _in(self, pos: int, size: int, align: int, where: str) -> None:
        if pos < 0 or pos + size > self.n:
            span = f"byte {pos}" if size <= 1 else f"bytes {pos}-{pos + size - 1}"
            raise self.fail(where, f"lies outside the file ({span} of {self.n})")
        if align > 1 and pos % align:
            raise self.fail(where, f"is misaligned (byte {pos})")

    def u32(self, pos: int) -> int:
        return int(struct.unpack_from("<I", self.buf, pos)[0])

    def deref(self, pos: int, where: str) -> int:
        """The position an offset stored at `pos` points to (offsets point forward)."""
        self._in(pos, 4, 4, where)
        off = self.u32(pos)
        if off == 0 or off >= 1 << 31:
            raise self.fail(where, f"has a bad offset ({off})")
        self._in(pos + off, 1, 1, where)
        return pos + off

    def vector(self, pos: int, esize: int, where: str) -> tuple[int, int]:
        """(start of the elements, count) of the vector at `pos`, checked."""
        self._in(pos, 4, 4, where)
        count = self.u32(pos)
        self._in(pos + 4, count * esize, 1, f"{where} ({count} elements)")
        return pos + 4, count

    def string(self, pos: int, where: str) -> None:
        start, length = self.vector(pos, 1, where)
        self._in(start + length, 1, 1, f"{where} (terminator)")
        if self.buf[start + length] != 0:
            raise self.fail(where, "is not NUL-terminated")

    def table(self, pos: int, name: str, where: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise self.fail(where, "nests too deep")
        self.tables += 1
        if self.tables > _MAX_TABLES:
            raise self.fail(where, "has too many tables")
        self._in(pos, 4, 4, where)
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self._in(vt, 4, 2, f"{where} (vtable)")
        vsize = struct.unpack_from("<H", self.buf, vt)[0]
        if vsize % 2:
            raise self.fail(where, f"has a bad vtable (size {vsize})")
        self._in(vt, vsize, 2, f"{where} (vtable)")
        # As flatbuffers' verifier: each field the schema knows is checked where it lies (a
        # vtable shorter than the schema leaves the rest absent); the vtable's table size is not
        # relied on (a reader never uses it).
        offsets = struct.unpack_from(f"<{max(vsize - 4, 0) // 2}H", self.buf, vt + 4)
        schema = _TABLES[name]
        for i, off in enumerate(offsets):
            if off == 0:
                continue
            if i in schema:
                self.field(pos, pos + off, schema[i], offsets, where, depth)

    def field(
        self,
        table: int,
        pos: int,
        spec: _Field,
        offsets: tuple[int, ...],
        where: str,
        depth: int,
    ) -> None:
        name, kind, arg = spec
        here = f"{where}.{name}"
        if kind == _SCALAR:
            self._in(pos, arg, arg, here)
            return
        target = self.deref(pos, here)
        if kind == _STRING:
            self.string(target, here)
        elif kind == _TABLE:
            self.table(target, arg, here, depth + 1)
        elif kind == _VSCALAR:
            self.vector(target, arg, here)
        elif kind == _VTABLE:
            start, count = self.vector(target, 4, here)
            for j in range(count):
                self.table(self.deref(start + 4 * j, here), arg, f"{here}[{j}]", depth + 1)
        else:  # a union: the type is the field before it
            type_index, tables = arg
            type_off = offsets[type_index] if type_index < len(offsets) else 0
            utype = self.buf[table + type_off] if type_off else 0
            # A type this schema does not know is left alone, as flatbuffers' verifier does:
            # a reader of the same schema does not read it either.
            if utype in tables:
                self.table(target, tables[utype], f"{here}<{tables[utype]}>", depth + 1)


def _field_pos(w: _Walk, table: int, index: int) -> int | None:
    vt = table - struct.unpack_from("<i", w.buf, table)[0]
    vsize = struct.unpack_from("<H", w.buf, vt)[0]
    if 4 + 2 * index >= vsize:
        return None
    off = struct.unpack_from("<H", w.buf, vt + 4 + 2 * index)[0]
    return table + off if off else None


def _scalar(w: _Walk, table: int, index: int, fmt: str, default: int = 0) -> int:
    pos = _field_pos(w, table, index)
    return default if pos is None else int(struct.unpack_from(fmt, w.buf, pos)[0])


def _items(w: _Walk, table: int, index: int, fmt: str = "<I") -> list[int]:
    """A vector field's elements (tables: their positions), read after the walk checked it."""
    pos = _field_pos(w, table, index)
    if pos is None:
        return []
    vec = pos + w.u32(pos)
    count = w.u32(vec)
    vals = struct.unpack_from(f"<{count}{fmt[1]}", w.buf, vec + 4)
    if fmt == "<I":  # offsets to tables
        return [vec + 4 + 4 * j + v for j, v in enumerate(vals)]
    return [int(v) for v in vals]


def _check_indices(w: _Walk, root: int) -> None:
    """The cross-references an interpreter follows without checking all of them itself."""
    n_codes = len(_items(w, root, 1))
    buffers = _items(w, root, 4)
    for b, buf in enumerate(buffers):
        offset, size = _scalar(w, buf, 1, "<Q"), _scalar(w, buf, 2, "<Q")
        if offset > 1 and offset + size > w.n:
            raise w.fail(f"Model.buffers[{b}]", f"data (bytes {offset}+{size}) is past the end")
    subgraphs = _items(w, root, 2)
    if not subgraphs:
        raise w.fail("Model", "has no subgraph")
    for s, sg in enumerate(subgraphs):
        tensors = _items(w, sg, 0)
        for t, tensor in enumerate(tensors):
            b = _scalar(w, tensor, 2, "<I")
            if b and b >= len(buffers):
                raise w.fail(f"subgraph {s} tensor {t}", f"names buffer {b} of {len(buffers)}")
        for io, idx in ((1, "inputs"), (2, "outputs")):
            for t in _items(w, sg, io, "<i"):
                if not 0 <= t < len(tensors):
                    raise w.fail(f"subgraph {s} {idx}", f"name tensor {t} of {len(tensors)}")
        for o, op in enumerate(_items(w, sg, 3)):
            code = _scalar(w, op, 0, "<I")
            if code >= n_codes:
                raise w.fail(f"subgraph {s} operator {o}", f"has opcode {code} of {n_codes}")
            for field in (1, 2, 8):
                for t in _items(w, op, field, "<i"):
                    if not -1 <= t < len(tensors):
                        raise w.fail(
                            f"subgraph {s} operator {o}", f"names tensor {t} of {len(tensors)}"
                        )


def _verify(buf: Any, label: str) -> None:
    n = len(buf)
    if n == 0:
        raise InvalidModelError(f"{label} is empty (0 bytes), not a TFLite model")
    if n < 8 or buf[4:8] != _IDENTIFIER:
        raise InvalidModelError(
            f"{label} is not a TFLite model: its bytes 4-8 are not the {_IDENTIFIER.decode()} "
            "identifier of a .tflite flatbuffer"
        )
    w = _Walk(buf, label)
    root = w.deref(0, "the root offset")
    w.table(root, "Model", "Model", 0)
    _check_indices(w, root)


def verify_model(model: str | os.PathLike[str] | bytes | bytearray | memoryview) -> None:
    """Raise InvalidModelError, with one line saying what is wrong, unless `model` (a path or
    the flatbuffer's bytes) is a TFLite flatbuffer whose offsets all stay inside it. A missing
    or unreadable path raises the OSError (FileNotFoundError, ...)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        _verify(model, "the model")
        return
    path = Path(model)
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            _verify(b"", str(path))
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            _verify(m, str(path))
