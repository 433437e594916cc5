"""Corrupt cached program binaries (the disk cache): an entry that fails our checks or the
driver's is rebuilt from source and replaced, in fresh processes (no in-memory programs)."""

from __future__ import annotations

import json
import os
import struct
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

    def __call__(
        self, env: dict[str, str] | None = None, **options: Any
    ) -> tuple[dict[str, Any], str]:
        p = self.run_python(
            [script("cache_child.py"), str(self.cache), self.runtime, json.dumps(options)],
            env={"CLGPU_LOG": "info", **(env or {})},
            timeout=300,
        )
        assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        rtol = 1e-2 if options.get("precision") == "fp16" else 1e-4
        compare([np.load(self.tmp / "output.npy")], [self.expected], rtol, rtol * 10)
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
    runtime: str, run_python: Callable, tmp_path: Path, opencl_shim: Path
) -> None:
    """The OpenCL shim damages every binary on its way to clCreateProgramWithBinary, after it
    passed our own checks (header, key and hash): the driver's refusal must also fall back to a
    source build and replace the entry."""
    why = _disk_cache_supported()
    if why:
        pytest.skip(why)
    child = CacheRun(runtime, run_python, tmp_path)
    child()
    before = {f: f.read_bytes() for f in child.files()}
    second, _ = child(
        env={
            "CLGPU_OPENCL_LIBRARY": str(opencl_shim),
            "CLGPU_SHIM_FAIL": "clCreateProgramWithBinary:corrupt",  # every call
        }
    )
    stats = second["stats"]
    assert stats["disk_cache_driver_rejected"] == len(before), stats
    assert stats["disk_cache_stored"] == len(before), stats
    third, _ = child()
    assert third["stats"]["disk_cache_hits"] == len(before), third


# ---- hostile entries: not a regular file, sizes that lie, a payload under another key ----------

HEADER = struct.Struct("<8sIIQQ")  # magic, format, key bytes, payload bytes, hash


def _fnv(data: bytes, h: int = 1469598103934665603) -> int:
    """The hash of src_cpp/cl/environment.cc (HashBytes)."""
    for b in data:
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


def _entry(path: Path) -> tuple[tuple[Any, ...], bytes, bytes]:
    """(header fields, key, payload) of a cache entry."""
    data = path.read_bytes()
    h = HEADER.unpack_from(data)
    return h, data[HEADER.size : HEADER.size + h[2]], data[HEADER.size + h[2] :]


def test_cache_entries_that_are_not_regular_files_are_ignored(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    """A FIFO under an entry's name blocked the process forever; a link to an entry outside the
    directory was followed. Both are refused, rebuilt and replaced by regular files."""
    child = CacheRun(runtime, run_python, tmp_path)
    child()
    files = sorted(child.files())
    assert len(files) >= 2, files
    outside = tmp_path / "outside.bin"
    outside.write_bytes(files[1].read_bytes())  # a valid entry, reached through a link
    files[0].unlink()
    os.mkfifo(files[0])
    files[1].unlink()
    files[1].symlink_to(outside)
    second, _ = child()  # run_python's timeout fails the test if the FIFO blocks
    assert second["stats"]["disk_cache_rejected"] == 2, second
    assert all(f.is_file() and not f.is_symlink() for f in files[:2]), files
    assert child()[0]["stats"]["disk_cache_hits"] == len(files)


def test_an_entry_whose_header_claims_4_gib_is_rebuilt_without_allocating_it(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    """Its payload was allocated up front (4.3 GB resident, then bad_alloc and the model
    refused); now the sizes are checked against the file first."""
    child = CacheRun(runtime, run_python, tmp_path)
    first, _ = child()
    f = sorted(child.files())[0]
    (magic, fmt, kb, _, h), key, payload = _entry(f)
    f.write_bytes(HEADER.pack(magic, fmt, kb, (4 << 30) - 1, h) + key + payload)
    second, _ = child()
    assert second["stats"]["disk_cache_rejected"] == 1, second
    assert second["rss_kb"] < first["rss_kb"] + (512 << 10), (first["rss_kb"], second["rss_kb"])


def test_a_payload_filed_under_another_key_is_rejected(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    """The fp16 build of a kernel copied over its fp32 entry, with a header whose payload hash
    and sizes are consistent, was loaded and gave wrong numbers: the entry's hash now covers
    its key too."""

    def plain(key: bytes) -> bytes:  # the key without the fp16 define
        lines = key.replace(b"-DSTORAGE_HALF", b"").split(b"\n")
        return b"\n".join(b" ".join(line.split()) for line in lines)

    child = CacheRun(runtime, run_python, tmp_path)
    child()
    fp32 = {_entry(f)[1]: f for f in child.files()}
    child(precision="fp16")
    fp16 = {plain(_entry(f)[1]): f for f in child.files() if _entry(f)[1] not in fp32}
    swapped = 0
    for key32, f32 in fp32.items():
        if plain(key32) not in fp16:
            continue
        (magic, fmt, _, _, _), _, payload16 = _entry(fp16[plain(key32)])
        f32.write_bytes(
            HEADER.pack(magic, fmt, len(key32), len(payload16), _fnv(payload16)) + key32 + payload16
        )
        swapped += 1
    assert swapped, "no kernel built in both precisions"
    third, _ = child()  # compares with the fp32 reference
    assert third["stats"]["disk_cache_rejected"] == swapped, third


def test_a_planted_link_in_place_of_the_model_directory_is_not_written_through(
    runtime: str, run_python: Callable, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    child = CacheRun(runtime, run_python, tmp_path)
    child.cache.mkdir()
    (child.cache / "faults-test").symlink_to(elsewhere, target_is_directory=True)
    first, err = child()
    assert first["stats"]["disk_cache_stored"] == 0, first
    assert not any(elsewhere.iterdir()), list(elsewhere.iterdir())
    assert "not a plain directory" in err, err
