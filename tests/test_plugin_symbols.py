"""The Python-free plugin's binary interface: it exports exactly TFLite's two external-delegate
entry points (and the OpenCL start lock the Python extension shares) and does not link libOpenCL
(OpenCL is dlopen'ed at run time, so one .so works with any ICD and on phones).
.ci/cross-aarch64.sh checks the same on the aarch64 build."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

import clgpu_delegate

# TFLite's two entry points, and the process's OpenCL start lock the Python extension's copy of
# the code takes (src_cpp/common/process_lock.h).
ENTRY_POINTS = {
    "tflite_plugin_create_delegate",
    "tflite_plugin_destroy_delegate",
    "clgpu_driver_lock",
}


@pytest.fixture(scope="module")
def plugin() -> str:
    return clgpu_delegate.plugin_path()


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def test_exports_exactly_the_two_entry_points(plugin: str) -> None:
    out = _run(_tool("nm"), "-D", "--defined-only", "--format=posix", plugin)
    exported = set()
    for line in out.splitlines():
        fields = line.split()
        # posix format: name type [value size]; type A marks the version-node names a
        # linker version script adds, which are not symbols anyone can call.
        if len(fields) >= 2 and fields[1] != "A":
            exported.add(fields[0].split("@")[0])
    assert exported == ENTRY_POINTS, (
        f"extra exports: {sorted(exported - ENTRY_POINTS)}; "
        f"missing: {sorted(ENTRY_POINTS - exported)}"
    )


def test_does_not_link_opencl_or_python(plugin: str) -> None:
    out = _run(_tool("readelf"), "-d", plugin)
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert needed, f"readelf found no DT_NEEDED entries in {plugin}:\n{out}"
    assert not [n for n in needed if "libOpenCL" in n], f"DT_NEEDED: {needed}"
    assert not [n for n in needed if "libpython" in n], f"DT_NEEDED: {needed}"


def test_entry_points_resolve_with_dlopen(plugin: str) -> None:
    # Loading must not need libOpenCL or any TfLite symbol from the host process.
    lib = ctypes.CDLL(plugin, mode=ctypes.RTLD_LOCAL)
    for name in ENTRY_POINTS:
        assert getattr(lib, name) is not None
