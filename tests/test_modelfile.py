"""verify_model(): the structural check that runs before an interpreter sees a model. Sound
models pass; every truncation, a broken offset, string or cross-reference is refused with a
line naming where; make_interpreter() refuses them under both runtimes (tflite_runtime would
read past the end and crash)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tflite

from clgpu_delegate import InvalidModelError, verify_model
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.runtime import make_interpreter


def _model() -> bytes:
    """Tables, vectors, strings and an options table with a vector (RESHAPE's new_shape)."""
    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU6")
    y = b.reshape(y, (1, -1))
    b.output(b.fully_connected(y, b.rand((5, 144))))
    return b.build()


def test_sound_models_pass(tmp_path: Path) -> None:
    data = _model()
    verify_model(data)
    verify_model(zoo.build("lenet5", fp16_weights=True))
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    verify_model(path)
    verify_model(str(path))


def test_every_truncation_is_refused() -> None:
    data = _model()
    for n in range(len(data)):
        with pytest.raises(InvalidModelError):
            verify_model(data[:n])


def test_not_a_model() -> None:
    with pytest.raises(InvalidModelError, match=r"is empty \(0 bytes\)"):
        verify_model(b"")
    with pytest.raises(InvalidModelError, match="TFL3 identifier"):
        verify_model(np.random.default_rng(0).bytes(4000))
    with pytest.raises(FileNotFoundError):
        verify_model("/nonexistent/model.tflite")


def _op_field(data: bytes, field: int, op_index: int = 0) -> int:
    """Absolute position of field `field` of subgraph 0's operator `op_index`."""
    op = tflite.Model.GetRootAs(data, 0).Subgraphs(0).Operators(op_index)
    off = op._tab.Offset(4 + 2 * field)
    assert off, "the field is not stored"
    return int(op._tab.Pos + off)


def _patch(data: bytes, pos: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


def test_broken_offsets_and_indices_are_located() -> None:
    data = _model()
    inputs = _op_field(data, 1)  # the offset to operator 0's input vector
    with pytest.raises(InvalidModelError, match=r"operators\[0\]\.inputs .*outside the file"):
        verify_model(_patch(data, inputs, "<I", len(data)))
    with pytest.raises(InvalidModelError, match=r"operators\[0\]\.inputs has a bad offset"):
        verify_model(_patch(data, inputs, "<I", 0))
    vec = inputs + struct.unpack_from("<I", data, inputs)[0]
    with pytest.raises(InvalidModelError, match=r"inputs \(1000000 elements\)"):
        verify_model(_patch(data, vec, "<I", 1_000_000))
    with pytest.raises(InvalidModelError, match="operator 0 names tensor 99"):
        verify_model(_patch(data, vec + 4, "<i", 99))
    # Operator 1 (RESHAPE): operator 0's opcode index is the default 0, which is not stored.
    with pytest.raises(InvalidModelError, match="operator 1 has opcode 7"):
        verify_model(_patch(data, _op_field(data, 0, 1), "<I", 7))


def test_broken_string_and_vtable() -> None:
    data = _model()
    sg = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    tensor = sg.Tensors(0)
    name_field = tensor._tab.Pos + tensor._tab.Offset(10)
    name = name_field + struct.unpack_from("<I", data, name_field)[0]
    length = struct.unpack_from("<I", data, name)[0]
    with pytest.raises(InvalidModelError, match=r"tensors\[0\]\.name is not NUL-terminated"):
        verify_model(_patch(data, name + 4 + length, "<B", ord("x")))
    with pytest.raises(InvalidModelError, match=r"tensors\[0\] \(vtable\)"):
        verify_model(_patch(data, tensor._tab.Pos, "<i", -len(data)))


def test_make_interpreter_refuses_damaged_models(runtime: str, tmp_path: Path) -> None:
    data = _model()
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(data[: len(data) // 2])
    for model in (data[:200], str(cut)):
        with pytest.raises(InvalidModelError, match="not a valid TFLite model"):
            make_interpreter(model, runtime=runtime)
    it = make_interpreter(data, runtime=runtime)
    it.allocate_tensors()
