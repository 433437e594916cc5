"""The OpenCL runtime (issue "[1 of 7]"): kernels from kernels/ run on the device and match
numpy, devices are listed and selected, a missing library or platform gives NoDeviceError
with the install hint, and a failed build carries its build log."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import clgpu_delegate
from clgpu_delegate._native import core

INSTALL_HINT = "pocl-opencl-icd"


@pytest.fixture(scope="module")
def runner():
    return core().KernelRunner("auto")


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---- kernels vs numpy ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 1003])
def test_binary_add_same_kernel(runner, rng, n: int) -> None:
    a, b = _rand(rng, n), _rand(rng, n)
    out = np.full(n, np.nan, np.float32)
    runner.run("binary", "binary_same", "", [a, b, out, n, 0, -0.5, 0.7], [(n + 3) // 4])
    np.testing.assert_allclose(out, np.clip(a + b, -0.5, 0.7), rtol=1e-6, atol=0)


def _broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    strides = [0] * len(out)
    stride = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[len(out) - len(shape) + i] = 0 if shape[i] == 1 else stride
        stride *= shape[i]
    return strides


def test_binary_add_broadcast_kernel(runner, rng) -> None:
    sa, sb = (2, 1, 4, 3), (5, 1, 3)
    out_shape = np.broadcast_shapes(sa, sb)
    a, b = _rand(rng, *sa), _rand(rng, *sb)
    meta = np.array(
        [*out_shape, *_broadcast_strides(sa, out_shape), *_broadcast_strides(sb, out_shape)],
        np.int32,
    )
    total = math.prod(out_shape)
    out = np.zeros(out_shape, np.float32)
    inf = float("inf")
    runner.run(
        "binary",
        "binary_broadcast",
        "",
        [a, b, out, total, len(out_shape), meta, 0, 0.0, inf],
        [total],
    )
    np.testing.assert_allclose(out, np.maximum(a + b, 0), rtol=1e-6, atol=0)


def conv2d_numpy(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray,
    stride: tuple[int, int],
    dilation: tuple[int, int],
    pad: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """NHWC x OHWI direct convolution in float64 with zero padding (top, left)."""
    n, h, w_, c = x.shape
    oc, kh, kw, _ = w.shape
    (sh, sw), (dh, dw), (pt, pl), (oh, ow) = stride, dilation, pad, out_hw
    big = np.zeros((n, pt + h + (oh * sh + kh * dh), pl + w_ + (ow * sw + kw * dw), c))
    big[:, pt : pt + h, pl : pl + w_] = x
    out = np.zeros((n, oh, ow, oc)) + bias
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            patch = big[:, y0 : y0 + oh * sh : sh, x0 : x0 + ow * sw : sw, :]
            out += patch @ w[:, ky, kx, :].T.astype(np.float64)
    return out


@pytest.mark.parametrize(
    ("shape", "oc", "k", "stride", "dilation", "padding"),
    [
        ((2, 9, 11, 3), 5, (3, 3), (2, 2), (1, 1), "SAME"),
        ((1, 12, 10, 7), 6, (5, 3), (1, 2), (2, 1), "VALID"),
        ((1, 6, 7, 33), 9, (1, 1), (1, 1), (1, 1), "VALID"),
    ],
)
def test_conv2d_direct_kernel(runner, rng, shape, oc, k, stride, dilation, padding) -> None:
    n, h, w, c = shape
    kh, kw = k
    x, filt, bias = _rand(rng, *shape), _rand(rng, oc, kh, kw, c), _rand(rng, oc)
    eff = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1)
    if padding == "SAME":
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
        pads = [
            max((o - 1) * s + e - i, 0) // 2
            for o, s, e, i in ((oh, stride[0], eff[0], h), (ow, stride[1], eff[1], w))
        ]
    else:
        oh, ow = -(-(h - eff[0] + 1) // stride[0]), -(-(w - eff[1] + 1) // stride[1])
        pads = [0, 0]
    out = np.zeros((n, oh, ow, oc), np.float32)
    lo, hi = -1.0, 6.0
    runner.run(
        "conv2d_direct",
        "conv2d_direct",
        "",
        # CG = C, OCG = OC: one group.
        [x, filt, bias, out, n, h, w, c, oh, ow, oc, kh, kw, *stride, *dilation, *pads]
        + [c, oc, lo, hi],
        [oc, ow, n * oh],
    )
    expected = np.clip(conv2d_numpy(x, filt, bias, stride, dilation, tuple(pads), (oh, ow)), lo, hi)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_transpose_kernel(runner, rng) -> None:
    shape, perm = (2, 3, 4, 5), (0, 3, 1, 2)
    x = _rand(rng, *shape)
    expected = x.transpose(perm)
    in_strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    meta = np.array([*expected.shape, *(in_strides[p] for p in perm)], np.int32)
    out = np.zeros(expected.shape, np.float32)
    runner.run("transpose", "transpose_nd", "", [x, out, x.size, len(shape), meta], [x.size])
    np.testing.assert_array_equal(out, expected)


def test_run_repeat_returns_kernel_time(runner, rng) -> None:
    a, b = _rand(rng, 64), _rand(rng, 64)
    out = np.zeros(64, np.float32)
    ns = runner.run(
        "binary", "binary_same", "", [a, b, out, 64, 0, -np.inf, np.inf], [16], [16], repeat=3
    )
    assert ns >= 0
    np.testing.assert_array_equal(out, a + b)


def test_run_source_runs_any_kernel_text(runner, rng) -> None:
    # A probe measures a device with kernels of its own this way (docs/limits.md's half arithmetic).
    source = "__kernel void axpb(__global float* x, float a, int b) { int i = get_global_id(0);"
    source += " x[i] = x[i] * a + (float)(b + SHIFT); }"
    x = _rand(rng, 32)
    want = x * 3.0 + 7.0
    ns = runner.run_source(source, "axpb", "-DSHIFT=2", [x, 3.0, 5], [32], repeat=1)
    assert ns >= 0
    np.testing.assert_allclose(x, want, rtol=1e-6)
    with pytest.raises(clgpu_delegate.BuildError):
        runner.run_source(source, "axpb", "", [x, 3.0, 5], [32])  # SHIFT undefined


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (
            lambda r: r.run("binary", "no_such_kernel", "", [], [1]),
            "OpenCLError",
            ["CL_INVALID_KERNEL_NAME", "no_such_kernel"],
        ),
        (lambda r: r.build("no_such_file", ""), "ClgpuError", ["no_such_file"]),
        (
            lambda r: r.run("binary", "binary_same", "", [np.zeros(8, np.float32)[::2]], [1]),
            "ClgpuError",
            ["contiguous"],
        ),
        (lambda r: r.run("binary", "binary_same", "", [], [1, 1, 1, 1]), "ClgpuError", ["dims"]),
        (lambda r: r.run("binary", "binary_same", "", ["text"], [1]), "ClgpuError", ["argument 0"]),
    ],
)
def test_runner_errors_are_python_exceptions(runner, call, error: str, words: list[str]) -> None:
    with pytest.raises(getattr(clgpu_delegate, error)) as err:
        call(runner)
    for w in words:
        assert w in str(err.value)


# ---- build errors --------------------------------------------------------------------------


def test_build_error_carries_the_build_log(runner) -> None:
    source = "__kernel void broken(__global float* x) { x[0] = undeclared_thing_42; }"
    with pytest.raises(clgpu_delegate.BuildError) as err:
        runner.build_source(source, "-DMY_DEFINE=3")
    text = str(err.value)
    assert "undeclared_thing_42" in text  # the compiler's log names the culprit
    assert "-DMY_DEFINE=3" in text  # and the options it was built with
    assert isinstance(err.value, clgpu_delegate.OpenCLError)


def test_syntax_error_build_log(runner) -> None:
    with pytest.raises(clgpu_delegate.BuildError) as err:
        runner.build_source("__kernel void broken(__global float* x) { x[0] = ; }", "")
    text = str(err.value)
    assert "expected" in text  # clang / NVIDIA: "expected (an) expression"
    assert "<source>" in text and len(text.splitlines()) >= 2  # program name, then the log


KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"


@pytest.mark.skipif(not KERNEL_DIR.is_dir(), reason="no kernels/ next to the tests")
def test_every_kernel_file_is_embedded_and_builds(runner) -> None:
    # common.cl is the prelude of every program, not a program of its own.
    names = sorted(p.stem for p in KERNEL_DIR.glob("*.cl") if p.stem != "common")
    assert names
    for name in names:
        runner.build(name, "")


# ---- devices -------------------------------------------------------------------------------


def test_devices_records() -> None:
    devs = clgpu_delegate.devices()
    assert devs, "no OpenCL device here"
    for i, d in enumerate(devs):
        assert d.index == i
        assert d.type in {"gpu", "cpu", "accelerator", "other"}
        assert d.name and d.platform and d.opencl_version.startswith("OpenCL")
        assert d.compute_units >= 1 and d.global_mem_bytes > 0 and d.local_mem_bytes > 0
        assert 0 < d.max_alloc_bytes <= d.global_mem_bytes
        assert isinstance(d.fp16, bool) and isinstance(d.host_unified_memory, bool)


def test_select_device() -> None:
    devs = clgpu_delegate.devices(probe_fp16=False)
    auto = clgpu_delegate.select_device("auto")
    if any(d.type == "gpu" for d in devs):
        assert auto.type == "gpu"
    assert clgpu_delegate.select_device(0).name == devs[0].name
    assert clgpu_delegate.select_device(devs[-1].name).name == devs[-1].name
    for kind in ("gpu", "cpu"):
        if any(d.type == kind for d in devs):
            assert clgpu_delegate.select_device(kind).type == kind
        else:
            with pytest.raises(clgpu_delegate.NoDeviceError):
                clgpu_delegate.select_device(kind)
    with pytest.raises(clgpu_delegate.NoDeviceError, match="Available"):
        clgpu_delegate.select_device(len(devs) + 5)


def test_devices_cli_lists_the_devices(run_python) -> None:
    p = run_python(["-m", "clgpu_delegate", "devices"])
    assert p.returncode == 0, p.stderr
    for d in clgpu_delegate.devices(probe_fp16=False):
        assert d.name in p.stdout and d.platform in p.stdout
    if any("Portable Computing Language" in d.platform for d in clgpu_delegate.devices(False)):
        assert "pthread" in p.stdout or "cpu" in p.stdout


# ---- no library / no platform (fresh processes: the library is loaded once) ---------------

_ENTRY_POINTS = """
import clgpu_delegate
from clgpu_delegate._native import core
calls = {
    "devices": clgpu_delegate.devices,
    "select_device": clgpu_delegate.select_device,
    "load": clgpu_delegate.load,
    "KernelRunner": lambda: core().KernelRunner("auto"),
}
for name, call in calls.items():
    try:
        result = call()
        print(name, "RESULT", result)
    except clgpu_delegate.NoDeviceError as e:
        print(name, "NoDeviceError", "HINT" if "pocl-opencl-icd" in str(e) else "NOHINT",
              repr(str(e)[:200]))
"""


def _outcomes(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:3] for line in stdout.splitlines() if line.strip()}


@pytest.mark.parametrize(
    "library", ["/nonexistent/libOpenCL.so.1", "libm.so.6", "TEXTFILE", "FIFO", "DIRECTORY"]
)
def test_missing_opencl_library(run_python, tmp_path: Path, library: str) -> None:
    if library == "TEXTFILE":
        library = str(tmp_path / "libOpenCL.so")
        Path(library).write_text("not a library")
    elif library == "FIFO":  # dlopen() of a FIFO waited for a writer forever
        library = str(tmp_path / "libOpenCL.so")
        os.mkfifo(library)
    elif library == "DIRECTORY":
        library = str(tmp_path)
    p = run_python(_ENTRY_POINTS, env={"CLGPU_OPENCL_LIBRARY": library}, timeout=60)
    assert p.returncode == 0, p.stderr  # no crash: every call raised NoDeviceError
    outcomes = _outcomes(p.stdout)
    assert outcomes == {
        name: ["NoDeviceError", "HINT"]
        for name in ("devices", "select_device", "load", "KernelRunner")
    }, p.stdout


def test_missing_opencl_library_cli(run_python) -> None:
    p = run_python(
        ["-m", "clgpu_delegate", "devices"],
        env={"CLGPU_OPENCL_LIBRARY": "/nonexistent/libOpenCL.so.1"},
    )
    assert p.returncode != 0
    assert INSTALL_HINT in p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr


def test_no_platform(run_python, tmp_path: Path) -> None:
    # ocl-icd reads the vendor list from OCL_ICD_VENDORS: an empty directory = no platform.
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    env = {"OCL_ICD_VENDORS": str(vendors), "CLGPU_OPENCL_LIBRARY": None}
    p = run_python(_ENTRY_POINTS, env=env)
    assert p.returncode == 0, p.stderr
    outcomes = _outcomes(p.stdout)
    if outcomes["devices"][0] == "RESULT" and outcomes["devices"][1] != "[]":
        pytest.skip("this OpenCL loader is not ocl-icd: it ignores OCL_ICD_VENDORS")
    assert outcomes["devices"] == ["RESULT", "[]"], p.stdout
    for name in ("select_device", "load", "KernelRunner"):
        assert outcomes[name] == ["NoDeviceError", "HINT"], p.stdout

    p = run_python(["-m", "clgpu_delegate", "devices"], env=env)
    assert p.returncode != 0
    assert INSTALL_HINT in p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
