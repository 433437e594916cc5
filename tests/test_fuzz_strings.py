"""The string fuzzer's short profile (the long one: tests/fuzz/strings.py --cases N): option names
and values, serialization_dir, model_token and library paths, random and adversarial, through
load() and the plugin's own entry point; each accepted or refused with a clear one-line error,
no crash, nothing written outside serialization_dir. And the cases it found, one by one.

CLGPU_FUZZ_STRINGS (default 60) and CLGPU_FUZZ_SEED (default 25) change the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fuzz.strings import fuzz_strings

import clgpu_delegate


def test_strings_are_accepted_or_refused_cleanly() -> None:
    cases = int(os.environ.get("CLGPU_FUZZ_STRINGS", "60"))
    f = fuzz_strings(cases, int(os.environ.get("CLGPU_FUZZ_SEED", "25")), long=20_000)
    print(json.dumps(f.counts, indent=1))
    assert not f.failures, "\n".join(f.failures)
    assert f.counts["cases"] == cases
    for surface in ("python", "plugin", "run", "library"):
        assert f.counts.get(f"surface_{surface}", 0) > 0, (surface, f.counts)
    assert f.counts.get("accepted", 0) > 0 and f.counts.get("refused", 0) > 0, f.counts


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("device", "x\udcff", "not valid UTF-8"),  # pybind11 made a multi-line TypeError of it
        ("precision", b"fp32", "must be text"),
        ("serialization_dir", True, "must be a path"),  # str(True) made a directory "true"
        ("precision", "fp32\nfp16", r"invalid value 'fp32\\x0afp16'"),
        ("max_alloc_bytes", "9" * 5000, r"\.\.\. \(5000 bytes\)"),
    ],
)
def test_values_without_a_clear_text_are_refused_in_one_line(
    key: str, value: object, match: str
) -> None:
    with pytest.raises(ValueError, match=match) as e:
        clgpu_delegate.load(**{key: value})
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_none_is_an_option_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serialization_dir=None was the value "None": the fuzzer's run wrote a directory "None"."""
    monkeypatch.chdir(tmp_path)
    d = clgpu_delegate.load(serialization_dir=None, model_token=None, device=None)
    assert "serialization_dir" not in d.options and d.options.get("device") is None
    d.close()
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("path", ["x" * 5000, "/nonexistent/lib.so", "<a directory>"])
def test_plugin_path_from_a_bad_environment_value(
    path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A name too long for the OS raised OSError echoing all of it; a directory passed."""
    monkeypatch.setenv("CLGPU_PLUGIN_PATH", str(tmp_path) if path.startswith("<") else path)
    with pytest.raises(FileNotFoundError, match="CLGPU_PLUGIN_PATH") as e:
        clgpu_delegate.plugin_path()
    assert "\n" not in str(e.value) and len(str(e.value)) < 400
