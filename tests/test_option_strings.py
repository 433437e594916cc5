"""Strings that reach C whole: an option value is read up to its first NUL there, so one holding
a NUL is refused (a model token "..\\x00x" once became "..", and the program cache wrote into the
parent of serialization_dir); a model token is a plain name."""

from __future__ import annotations

from pathlib import Path

import pytest

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def _model() -> bytes:
    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 4, 4, 3))
    b.output(b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,))))
    return b.build()


@pytest.mark.parametrize("token", ["..\x00x", "\x00", "a\x00/b", "..", ".", "a/b"])
def test_model_token_escape_is_refused(token: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(ValueError, match="model_token") as e:
        clgpu_delegate.load(serialization_dir=str(cache), model_token=token, partitioning="all")
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    assert not any(cache.iterdir())


@pytest.mark.parametrize(
    "key,value",
    [("serialization_dir", "/tmp/x\x00y"), ("device", "gpu\x00"), ("precision", "fp32\x00fp16")],
)
def test_nul_in_any_value_is_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"option '{key}' holds a NUL"):
        clgpu_delegate.load(**{key: value})


def test_plain_token_is_taken(tmp_path: Path, runtime: str) -> None:
    """A plain name works, and whatever the cache writes stays inside its directory (a program
    already in the process's memory cache writes nothing)."""
    d = clgpu_delegate.load(serialization_dir=str(tmp_path), model_token="m-1.v2", cpu_warmup=False)
    it = make_interpreter(_model(), [d], runtime=runtime)
    it.allocate_tensors()
    it.invoke()
    assert d.delegated_nodes()
    outside = [p for p in tmp_path.rglob("*") if not p.is_relative_to(tmp_path / "m-1.v2")]
    assert outside in ([], [tmp_path / "m-1.v2"]), outside
