"""XNNPACK's time for one op over a sweep of shapes, float and int8, as the interpreter runs it:
what the cost model's CPU side is fitted on where a roofline misses (issue #42). Each op follows a
base 1x1 conv (which keeps XNNPACK's threads awake, as the nodes before it in a model do); its
time is the model's invoke less the base model's, invokes only (no output read back).

    python bench/cpu_op_sweep.py --conv [--threads 16,4] [--runs 40] [--tag NAME] [--out DIR]
    python bench/cpu_op_sweep.py --channels ...
    python bench/cpu_op_sweep.py --hybrid ...

--conv: CONV_2D (1x1 to 10x8 filters, strides 1 and 2, 1-128 input channels), DEPTHWISE_CONV_2D
and FULLY_CONNECTED over a grid of shapes, with the host's int8 matrix extensions (XNNPACK's
int8 GEMMs differ by them): cpu-int8-conv[-TAG]-<host CPU>.json and .md, what the int8
convolution's tile cost (src_cpp/ops/conv2d.cc) is fitted on. --channels: PRELU, depthwise,
ADD, a max pool and PAD over 32-128 pixels square of 4-64 channels: cpu-channel-ops[-TAG]-*.
--hybrid: CONV_2D and FULLY_CONNECTED on small maps in float and in dynamic-range form (int8
weights, float activations, which XNNPACK runs as a conversion of the input and an int8 GEMM):
cpu-hybrid-conv[-TAG]-*, what the hybrid convolution's CPU cost (src_cpp/ops/conv2d.cc) is
fitted on.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402
from cpu_int8_ops import _host_cpu  # noqa: E402

# (kind, spatial size, input channels, output channels, filter (h, w), stride) of the --conv grid
Conv = tuple[str, int, int, int, tuple[int, int], int]


def _conv_grid() -> list[Conv]:
    grid: list[Conv] = []
    for hw in (12, 24, 48, 96):
        for ic in (1, 3, 8, 16, 32, 64, 128):
            for oc in (8, 16, 32, 64, 128, 256):
                for k in (1, 3):
                    if hw * hw * ic * oc * k * k <= 60e6:  # the grid's long tail adds little
                        grid.append(("conv", hw, ic, oc, (k, k), 1))
        # long filters and strides, as audio front ends have them
        for f in ((5, 5), (7, 7), (10, 8), (1, 9)):
            for ic in (1, 8, 32):
                for oc in (8, 64):
                    for s in (1, 2):
                        if hw * hw * ic * oc * f[0] * f[1] / (s * s) <= 60e6:
                            grid.append(("conv", hw, ic, oc, f, s))
        for c in (8, 16, 32, 64, 128, 256):
            for s in (1, 2):
                grid.append(("depthwise", hw, c, c, (3, 3), s))
    for ic in (64, 256, 1024, 2048):
        for oc in (2, 16, 64, 256, 1024):
            grid.append(("fc", 1, ic, oc, (1, 1), 1))
    grid.append(("conv", 96, 3, 32, (3, 3), 2))
    return grid


def _conv_model(kind: str, hw: int, ic: int, oc: int, f: tuple[int, int], s: int,
                op: bool = True) -> bytes:
    """A 1x1 conv to `ic` channels (which keeps XNNPACK's threads awake, as the nodes before
    one in a model do), then the op (op=False: the conv alone, the base to subtract)."""
    from clgpu_delegate.modelgen import ModelBuilder

    b = ModelBuilder(seed=0)
    if kind == "fc":
        x = b.input("x", (1, ic))
        y = b.fully_connected(x, b.rand((ic, ic)), b.rand((ic,), 0.1))
        b.output(b.fully_connected(y, b.rand((oc, ic)), b.rand((oc,), 0.1)) if op else y)
        return b.build()
    x = b.input("x", (1, hw, hw, ic))
    y = b.conv2d(x, b.rand((ic, 1, 1, ic)), b.rand((ic,), 0.1), 1, 1, "SAME")
    if op and kind == "depthwise":
        y = b.depthwise_conv2d(y, b.rand((1, *f, ic)), b.rand((ic,), 0.1), stride=(s, s))
    elif op:
        y = b.conv2d(y, b.rand((oc, *f, ic)), b.rand((oc,), 0.1), (s, s), 1, "SAME")
    b.output(y)
    return b.build()


def _hybrid_grid() -> list[Conv]:
    """Small maps (a spotter's 5 x 25 is 11 x 11's pixels), where a conversion's thread hand-off
    weighs against the arithmetic the int8 GEMM saves."""
    grid: list[Conv] = []
    for hw in (4, 7, 11, 16, 24, 48):
        for ic in (1, 16, 64, 128):
            for oc in (16, 64, 128):
                for f in ((1, 1), (3, 3)):
                    grid.append(("conv", hw, ic, oc, f, 1))
    for ic in (64, 256, 1024):
        for oc in (16, 256, 1024):
            grid.append(("fc", 1, ic, oc, (1, 1), 1))
    return grid


def _invoke_ms(model: bytes, runtime: str, threads: int, runs: int) -> float:
    """Median of the invokes alone: no output is read back, whose copy would swamp a large one."""
    from clgpu_delegate.runtime import make_interpreter, random_inputs

    interp = make_interpreter(model, None, num_threads=threads, runtime=runtime)
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), random_inputs(interp.get_input_details(), 0),
                    strict=True):
        interp.set_tensor(d["index"], x)
    times = []
    for i in range(runs + 5):
        t0 = time.perf_counter()
        interp.invoke()
        if i >= 5:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def _conv_rows(runtime: str, threads: int, runs: int,
               hybrid: bool = False) -> list[dict[str, Any]]:
    """Each op's time after the base conv: the model's invoke less the base's, float and int8
    (hybrid: float and dynamic-range, the base conv in the same form as the op)."""
    from clgpu_delegate.modelgen import dynamic_range_model, quantize_model

    rows = []
    for kind, hw, ic, oc, f, s in _hybrid_grid() if hybrid else _conv_grid():
        times = {}
        for form in ("float", "hybrid" if hybrid else "int8"):
            pair = [_conv_model(kind, hw, ic, oc, f, s, op) for op in (True, False)]
            if form == "int8":
                pair = [quantize_model(m, io="int8") for m in pair]
            elif form == "hybrid":
                pair = [dynamic_range_model(m) for m in pair]
            with_op, base = (_invoke_ms(m, runtime, threads, runs) for m in pair)
            times[f"{form}_ms"], times[f"{form}_base_ms"] = with_op - base, base
        pixels = (-(-hw // s)) ** 2
        rows.append({"runtime": runtime, "threads": threads, "kind": kind, "hw": hw, "ic": ic,
                     "oc": oc, "kh": f[0], "kw": f[1], "stride": s, "pixels": pixels,
                     "macs": pixels * f[0] * f[1] * ic * (1 if kind == "depthwise" else oc),
                     **times})
        print(rows[-1])
    return rows


CHANNEL_OPS = ("prelu", "depthwise_1x1", "depthwise_3x3", "add", "max_pool_2x2", "pad_channels")


def _channel_model(op: str, hw: int, c: int, with_op: bool = True) -> bytes:
    """The --channels sweep's model: the base 1x1 conv, then `op` over an hw x hw x c map."""
    from clgpu_delegate.modelgen import ModelBuilder

    b = ModelBuilder(seed=0)
    x = b.input("x", (1, hw, hw, c))
    y = b.conv2d(x, b.rand((c, 1, 1, c)), b.rand((c,), 0.1), 1, 1, "SAME")
    if not with_op:
        pass
    elif op == "prelu":
        y = b.prelu(y, b.rand((1, 1, c), 0.1))
    elif op.startswith("depthwise"):
        k = int(op[-1])
        y = b.depthwise_conv2d(y, b.rand((1, k, k, c)), b.rand((c,), 0.1), stride=(1, 1))
    elif op == "add":
        y = b.add(y, x)
    elif op == "max_pool_2x2":
        y = b.max_pool2d(y, 2, 2)
    elif op == "pad_channels":
        y = b.pad(y, [(0, 0), (0, 0), (0, 0), (0, c)])
    b.output(y)
    return b.build()


def _channel_rows(runtime: str, threads: int, runs: int) -> list[dict[str, Any]]:
    """Each op's time after the base conv, float and int8, at few channels: where XNNPACK's
    cost follows pixels rather than bytes."""
    from clgpu_delegate.modelgen import quantize_model

    rows = []
    for op in CHANNEL_OPS:
        for hw in (32, 64, 128):
            for c in (4, 8, 16, 32, 64):
                row: dict[str, Any] = {"runtime": runtime, "threads": threads, "kind": op,
                                       "hw": hw, "ic": c, "oc": c, "pixels": hw * hw}
                for form in ("float", "int8"):
                    pair = [_channel_model(op, hw, c, w) for w in (True, False)]
                    if form == "int8":
                        try:
                            pair = [quantize_model(m, io="int8") for m in pair]
                        except Exception as e:  # an op the quantizer does not take
                            row["int8_error"] = str(e).splitlines()[0][:80]
                            continue
                    with_op, base = (_invoke_ms(m, runtime, threads, runs) for m in pair)
                    row[f"{form}_ms"], row[f"{form}_base_ms"] = with_op - base, base
                rows.append(row)
                print(row)
    return rows


def _matrix_extensions() -> str:
    """The host's int8 dot-product / matrix flags: which int8 GEMMs XNNPACK may pick."""
    try:
        flags = set(re.findall(r"[a-z0-9_]+", Path("/proc/cpuinfo").read_text()))
    except OSError:
        return "unknown"
    wanted = ("amx_int8", "amx_tile", "avx512_vnni", "avx_vnni", "avx512bw", "asimddp", "i8mm")
    return " ".join(f for f in wanted if f in flags) or "none"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--conv", action="store_true", help="convolutions, float and int8")
    mode.add_argument("--channels", action="store_true", help="ops over few channels")
    mode.add_argument("--hybrid", action="store_true", help="dynamic-range CONV_2D and FC")
    ap.add_argument("--threads", default="16,4")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from clgpu_delegate.runtime import available_runtimes

    rows_at = (_conv_rows if a.conv else _channel_rows if a.channels
               else functools.partial(_conv_rows, hybrid=True))
    rows = [row for runtime in available_runtimes() for t in a.threads.split(",")
            for row in rows_at(runtime, int(t), a.runs)]
    other = "hybrid" if a.hybrid else "int8"
    cols = [("runtime", "runtime"), ("threads", "threads"), ("kind", "op"), ("hw", "size"),
            ("ic", "in ch"), ("oc", "out ch"), ("kh", "filter h"), ("kw", "filter w"),
            ("stride", "stride"), ("float_ms", "float ms"), (f"{other}_ms", f"{other} ms"),
            ("float_base_ms", "float base ms"), (f"{other}_base_ms", f"{other} base ms")]
    meta = {"device": _host_cpu(), "int8 extensions": _matrix_extensions()}
    stem = ("cpu-int8-conv" if a.conv else "cpu-channel-ops" if a.channels
            else "cpu-hybrid-conv") + (f"-{a.tag}" if a.tag else "")
    print(write_results(stem, meta, rows, cols, Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
