"""Corrupt cached program binaries (the disk cache): an entry that fails our checks or the
driver's is rebuilt from source and replaced, in fresh processes (no in-memory programs)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faults.helpers import MODEL, reference, script
from parity import compare, random_inputs

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter


def _disk_cache_supported() -> str | None:
    try:
        clgpu_delegate.load(serialization_dir=os.devnull + ".missing", model_token="probe")
    except ValueError as e:
        if "serialization_dir" in str(e) or "model_token" in str(e):
            return f"the disk cache options are not accepted yet: {e}"
    return None


def _corrupt(files: list[Path]) -> dict[Path, bytes]:
    """Flips bytes in the middle of half the files, truncates the others; returns the bad bytes."""
    bad = {}
    for i, f in enumerate(sorted(files)):
        data = bytearray(f.read_bytes())
        if i % 2 == 0 and len(data) > 16:
            mid = len(data) // 2
            for j in range(mid, min(mid + 64, len(data))):
                data[j] ^= 0xA5
        else:
            data = data[: len(data) // 3]
        f.write_bytes(bytes(data))
        bad[f] = bytes(data)
    return bad


class CacheRun:
    """Runs MODEL with serialization_dir in fresh processes (no in-memory programs)."""

    def __init__(self, runtime: str, run_python: Callable, tmp_path: Path) -> None:
        self.runtime, self.run_python, self.tmp = runtime, run_python, tmp_path
        self.cache = tmp_path / "cache"
        (tmp_path / "model.tflite").write_bytes(MODEL)
        inputs = random_inputs(
            make_interpreter(MODEL, None, runtime=runtime).get_input_details(), 7
        )
        np.save(tmp_path / "input.npy", inputs[0])
        self.expected = reference(runtime, inputs)[0]

    def __call__(self, **options: Any) -> tuple[dict[str, Any], str]:
        p = self.run_python(
            [script("cache_child.py"), str(self.cache), self.runtime, json.dumps(options)],
            env={"CLGPU_LOG": "info"},
        )
        assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        compare([np.load(self.tmp / "output.npy")], [self.expected], 1e-4, None)
        result = json.loads(p.stdout.strip().splitlines()[-1])
        assert result["delegated"], result
        return result, p.stderr

    def files(self) -> list[Path]:
        return [f for f in self.cache.rglob("*") if f.is_file()]


def test_corrupt_cached_binary_is_rebuilt_and_replaced(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    why = _disk_cache_supported()
    if why:
        pytest.skip(why)
    child = CacheRun(runtime, run_python, tmp_path)
    first, _ = child()  # fills the cache
    files = child.files()
    assert files and first["stats"]["disk_cache_stored"] == len(files), (first, files)
    bad = _corrupt(files)
    second, err = child()  # rejects every entry, builds from source, rewrites the files
    stats = second["stats"]
    assert stats["disk_cache_rejected"] == len(files), stats
    assert stats["disk_cache_hits"] == 0 and stats["disk_cache_stored"] == len(files), stats
    assert "ignoring invalid cached binary" in err, err
    assert all(f.read_bytes() != bad[f] for f in files), "corrupt entries were not replaced"
    third, err = child()  # the replaced binaries load cleanly: nothing built from source
    stats = third["stats"]
    assert stats["disk_cache_hits"] == len(files) and stats["disk_cache_rejected"] == 0, stats
    assert stats["programs_built"] == 0, stats
    assert "ignoring invalid cached binary" not in err, err


def test_cached_binary_the_driver_refuses_is_rebuilt(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    """fail_at="cache" hands the driver garbage that passed our own checks (header, key and
    hash): the driver's refusal must also fall back to a source build and replace the entry."""
    why = _disk_cache_supported()
    if why:
        pytest.skip(why)
    child = CacheRun(runtime, run_python, tmp_path)
    child()
    before = {f: f.read_bytes() for f in child.files()}
    second, _ = child(fail_at="cache")
    stats = second["stats"]
    assert stats["disk_cache_driver_rejected"] == len(before), stats
    assert stats["disk_cache_stored"] == len(before), stats
    third, _ = child()
    assert third["stats"]["disk_cache_hits"] == len(before), third
