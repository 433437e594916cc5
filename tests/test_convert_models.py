"""bench/convert_models.py's choice of models and variants, without the converters (they live in
a venv of their own): the small set's names, which converter gets which variant, the files they
go to, and a clear error for a name it does not know."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench_scripts import load_bench


def _planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> list[Any]:
    """What main() would convert: (converter, model, variants) per call, converting nothing."""
    cm = load_bench("convert_models")
    calls: list[Any] = []

    def run(converter: str, name: str, out: Path, variants: list[str], timeout: float) -> dict:
        calls.append((converter, name, list(variants)))
        return {cm._path(out, converter, name, v).name: None for v in variants}

    monkeypatch.setattr(cm, "_run", run)
    assert cm.main(["--out", str(tmp_path), *argv]) == 0
    return calls


def test_the_small_set_names_issue_42s_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _planned(tmp_path, monkeypatch, "--models", "small", "--no-dq",
                     "--converters", "litert_torch")
    names = [name for _, name, _ in calls]
    assert names and all(n.startswith("small_") for n in names), names
    for kind in ("ds_cnn_s", "tc_resnet8", "kws_mnv2", "tiny_mlp", "prelu_cnn_shared"):
        assert f"small_{kind}" in names, names


def test_the_named_models_get_each_variant_from_each_converter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _planned(tmp_path, monkeypatch, "--models", "small_ds_cnn_s,small_tiny_mlp", "--dq",
                     "small_ds_cnn_s", "--int8", "small_ds_cnn_s")
    assert calls == [
        ("litert_torch", "small_ds_cnn_s", ["fp32", "dq", "int8"]),
        ("onnx2tf", "small_ds_cnn_s", ["fp32", "dq", "int8"]),
        ("litert_torch", "small_tiny_mlp", ["fp32"]),
        ("onnx2tf", "small_tiny_mlp", ["fp32"]),
    ]
    cm = load_bench("convert_models")
    names = [cm._path(tmp_path, "onnx2tf", "m", v).name for v in ("fp32", "dq", "int8")]
    assert names == ["onnx2tf_m.tflite", "onnx2tf_m_dq.tflite", "onnx2tf_m_int8.tflite"]


def test_an_unknown_int8_model_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        _planned(tmp_path, monkeypatch, "--models", "small", "--int8", "nope")
    assert e.value.code == 2
    assert "unknown nope" in capsys.readouterr().err
