"""The CPU's time per element of int8 element-wise ops, as the interpreter runs them (XNNPACK
where it takes the op, TFLite's own kernel where it does not): the figure the cost model's CPU
side gives an op that XNNPACK leaves (OpHandler::cpu_int8_ns_per_element). Each op follows an
int8 1x1 conv to a 56 x 56 x 64 map; its time is the model's less that of the conv alone.

    python bench/cpu_int8_ops.py [--threads 1,2] [--runs 40] [--tag NAME] [--out bench/results]
    python bench/cpu_int8_ops.py --float ...   # float MIRROR_PAD (XNNPACK leaves it), PAD, ...
    python bench/cpu_int8_ops.py --hybrid ...  # dynamic-range CONV_2D, DEPTHWISE, FC vs float
    python bench/cpu_int8_ops.py --builtin ... # int8 ops and forms XNNPACK leaves (pools, ...)
    python bench/cpu_int8_ops.py --conv ...    # int8 CONV_2D / DEPTHWISE / FC alone vs float
    python bench/cpu_int8_ops.py --channels ... # PRELU, DEPTHWISE, ADD, pools, PAD at 4-64 ch

Writes cpu-int8-ops[-TAG]-<host CPU>.json and .md (cpu-float-ops with --float: the figure is
OpHandler::cpu_float_ns_per_element's; cpu-hybrid-ops with --hybrid: each op alone on a 56 x 56
x 64 map, or a 2048 -> 3072 FC, in float and in TF's dynamic-range form, whose int8 weights
TFLite's own hybrid kernels read: OpHandler::cpu_hybrid_ns_per_flop's figure) with the
interpreter's runtime, its threads, date and command; cpu-int8-builtin with --builtin: int8
AVERAGE_POOL_2D and SOFTMAX per output element, DEPTHWISE_CONV_2D with a depth multiplier per
output pixel x input channel x filter tap, each after the 1x1 conv; cpu-int8-conv with --conv:
one CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED alone over a grid of shapes, float and int8,
with the host's int8 matrix extensions (XNNPACK's int8 GEMMs differ by them): what the CPU
side's int8 convolution time is fitted on; cpu-channel-ops with --channels: element-wise,
depthwise, pooling and PAD ops over 32-128 pixels square of 4-64 channels, float and int8.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402

SHAPE = (1, 56, 56, 64)
OPS = ("hard_swish", "logistic", "tanh", "relu")
FLOAT_OPS = ("mirror_pad", "pad", "transpose")


def _model(op: str | None, as_float: bool = False) -> bytes:
    from clgpu_delegate.modelgen import ModelBuilder, quantize_model

    b = ModelBuilder(seed=0)
    x = b.input("x", SHAPE)
    y = b.conv2d(x, b.rand((SHAPE[3], 1, 1, SHAPE[3])), b.rand((SHAPE[3],), 0.1), 1, 1, "SAME")
    if op in ("mirror_pad", "pad"):  # one pixel on each side, as NCHW converters pad
        y = getattr(b, op)(y, [(0, 0), (1, 1), (1, 1), (0, 0)])
    elif op == "transpose":  # to NCHW
        y = b.transpose(y, (0, 3, 1, 2))
    elif op:
        y = getattr(b, op)(y)
    b.output(y)
    return b.build() if as_float else quantize_model(b.build(), io="int8")


# op -> (unit of its figure, the unit's count in the op)
BUILTIN_OPS: dict[str, tuple[str, int]] = {
    "average_pool_2x2": ("output element", 28 * 28 * 64),
    "softmax": ("output element", 56 * 56 * 64),
    # 64 channels x 2, and 8 channels x 8 (a 1x1 conv to 8 first): pixel x input channel x tap
    "depthwise_m2": ("pixel x channel x tap", 56 * 56 * 64 * 9),
    "depthwise_m8": ("pixel x channel x tap", 56 * 56 * 8 * 9),
    # one channel x 8, 7x7 taps, stride 2 (a 1x1 conv to one channel first): an audio front end's
    "depthwise_m8_k7s2": ("pixel x channel x tap", 28 * 28 * 1 * 49),
}


def _builtin_model(op: str | None) -> bytes:
    from clgpu_delegate.modelgen import ModelBuilder, quantize_model

    b = ModelBuilder(seed=0)
    x = b.input("x", SHAPE)
    c = {"depthwise_m8": 8, "depthwise_m8_base": 8, "depthwise_m8_k7s2": 1,
         "depthwise_m8_k7s2_base": 1}.get(op or "", SHAPE[3])  # "_base": the conv alone
    y = b.conv2d(x, b.rand((c, 1, 1, SHAPE[3])), b.rand((c,), 0.1), 1, 1, "SAME")
    if op == "average_pool_2x2":
        y = b.avg_pool2d(y, 2, 2)
    elif op == "softmax":
        y = b.softmax(y)
    elif op in ("depthwise_m2", "depthwise_m8", "depthwise_m8_k7s2"):
        m, k = (8, 7) if op.endswith("k7s2") else (int(op[-1]), 3)
        s = 2 if op.endswith("k7s2") else 1
        y = b.depthwise_conv2d(y, b.rand((1, k, k, c * m)), b.rand((c * m,), 0.1),
                               stride=(s, s), depth_multiplier=m)
    b.output(y)
    return quantize_model(b.build(), io="int8")


def _builtin_rows(runtime: str, threads: int, runs: int) -> list[dict[str, Any]]:
    rows = []
    bases = {op: _ms(_builtin_model(f"{op}_base" if op.startswith("depthwise_m8") else None),
                     runtime, threads, runs) for op in ("", "depthwise_m8", "depthwise_m8_k7s2")}
    for op, (unit, count) in BUILTIN_OPS.items():
        base = bases[op if op.startswith("depthwise_m8") else ""]
        ms = _ms(_builtin_model(op), runtime, threads, runs)
        rows.append({"runtime": runtime, "threads": threads, "op": op, "conv_ms": base, "ms": ms,
                     "ns_per_unit": (ms - base) * 1e6 / count, "unit": unit})
        print(rows[-1])
    return rows


HYBRID_OPS = ("conv_1x1", "conv_3x3", "depthwise_3x3", "fully_connected", "chain_49x1x96",
              "chain_28x28x64")
CHAIN_BLOCKS = 8  # 1x1 conv + 3x3 depthwise each: a hybrid depthwise between XNNPACK's subgraphs


def _hybrid_pair(op: str) -> tuple[bytes, bytes, float]:
    """(float model, its dynamic-range form, the op's FLOPs)."""
    from clgpu_delegate.modelgen import ModelBuilder, dynamic_range_model

    b = ModelBuilder(seed=0)
    c = SHAPE[3]
    if op.startswith("chain_"):  # per block: 1x1 conv, then a 3x3 depthwise
        h, w, c = (int(v) for v in op[len("chain_"):].split("x"))
        y = b.input("x", (1, h, w, c))
        for _ in range(CHAIN_BLOCKS):
            y = b.conv2d(y, b.rand((c, 1, 1, c)), b.rand((c,), 0.1), 1, 1, "SAME")
            y = b.depthwise_conv2d(y, b.rand((1, 3, 3, c)), b.rand((c,), 0.1), stride=(1, 1))
        b.output(y)
        model = b.build()
        return model, dynamic_range_model(model), 2.0 * CHAIN_BLOCKS * h * w * c * (c + 9)
    if op == "fully_connected":
        x = b.input("x", (1, 2048))
        b.output(b.fully_connected(x, b.rand((3072, 2048)), b.rand((3072,), 0.1)))
        flops = 2.0 * 2048 * 3072
    else:
        x = b.input("x", SHAPE)
        pixels = SHAPE[1] * SHAPE[2]
        if op == "depthwise_3x3":
            y = b.depthwise_conv2d(x, b.rand((1, 3, 3, c)), b.rand((c,), 0.1), stride=(1, 1))
            flops = 2.0 * pixels * c * 9
        else:
            k = 3 if op == "conv_3x3" else 1
            y = b.conv2d(x, b.rand((c, k, k, c)), b.rand((c,), 0.1), 1, 1, "SAME")
            flops = 2.0 * pixels * c * c * k * k
        b.output(y)
    model = b.build()
    return model, dynamic_range_model(model), flops


def _hybrid_rows(runtime: str, threads: int, runs: int) -> list[dict[str, Any]]:
    rows = []
    for op in HYBRID_OPS:
        model, hybrid, flops = _hybrid_pair(op)
        f_ms, h_ms = _ms(model, runtime, threads, runs), _ms(hybrid, runtime, threads, runs)
        rows.append({"runtime": runtime, "threads": threads, "op": op, "float_ms": f_ms,
                     "hybrid_ms": h_ms, "hybrid_ns_per_flop": h_ms * 1e6 / flops,
                     "hybrid_over_float": h_ms / f_ms})
        print(rows[-1])
    return rows


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


def _conv_rows(runtime: str, threads: int, runs: int) -> list[dict[str, Any]]:
    """Each op's time after the base conv: the model's invoke less the base's, float and int8."""
    from clgpu_delegate.modelgen import quantize_model

    rows = []
    for kind, hw, ic, oc, f, s in _conv_grid():
        times = {}
        for form in ("float", "int8"):
            pair = [_conv_model(kind, hw, ic, oc, f, s, op) for op in (True, False)]
            if form == "int8":
                pair = [quantize_model(m, io="int8") for m in pair]
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


def _ms(model: bytes, runtime: str, threads: int, runs: int) -> float:
    """Median invoke of the model on the CPU alone (planning's Timed, as never_slower.py)."""
    from clgpu_delegate.planning import Timed
    from clgpu_delegate.runtime import make_interpreter, random_inputs

    t = Timed(lambda: (None, make_interpreter(model, None, num_threads=threads, runtime=runtime)))
    t.interp.allocate_tensors()
    feeds = random_inputs(t.inputs, 0)
    for _ in range(5):
        t.run(feeds)
    return float(np.median([t.run(feeds) for _ in range(runs)]))


def _host_cpu() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"model name\s*:\s*(.+)", text)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--float", action="store_true", help="the float ops XNNPACK leaves")
    ap.add_argument("--hybrid", action="store_true", help="dynamic-range ops against float")
    ap.add_argument("--builtin", action="store_true", help="int8 forms XNNPACK leaves")
    ap.add_argument("--conv", action="store_true", help="int8 convolutions alone vs float")
    ap.add_argument("--channels", action="store_true", help="ops over few channels, per pixel")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from clgpu_delegate.runtime import available_runtimes

    elements = int(np.prod(SHAPE))
    rows: list[dict[str, Any]] = []
    def sweep(rows_at: Any) -> list[dict[str, Any]]:  # every runtime, every --threads
        return [row for runtime in available_runtimes() for t in a.threads.split(",")
                for row in rows_at(runtime, int(t), a.runs)]

    if a.conv or a.channels:
        rows = sweep(_conv_rows if a.conv else _channel_rows)
        cols = [("runtime", "runtime"), ("threads", "threads"), ("kind", "op"), ("hw", "size"),
                ("ic", "in ch"), ("oc", "out ch"), ("kh", "filter h"), ("kw", "filter w"),
                ("stride", "stride"),
                ("float_ms", "float ms"), ("int8_ms", "int8 ms"),
                ("float_base_ms", "float base ms"), ("int8_base_ms", "int8 base ms")]
        meta = {"device": _host_cpu(), "int8 extensions": _matrix_extensions()}
        stem = ("cpu-int8-conv" if a.conv else "cpu-channel-ops") + (f"-{a.tag}" if a.tag else "")
        print(write_results(stem, meta, rows, cols, Path(a.out)))
        return 0
    if a.builtin:
        rows = sweep(_builtin_rows)
        cols = [("runtime", "runtime"), ("threads", "threads"), ("op", "op"),
                ("conv_ms", "conv alone ms"), ("ms", "conv + op ms"),
                ("ns_per_unit", "op ns per unit"), ("unit", "unit")]
        stem = "cpu-int8-builtin" + (f"-{a.tag}" if a.tag else "")
        print(write_results(stem, {"device": _host_cpu()}, rows, cols, Path(a.out)))
        return 0
    if a.hybrid:
        rows = sweep(_hybrid_rows)
        cols = [("runtime", "runtime"), ("threads", "threads"), ("op", "op"),
                ("float_ms", "float ms"), ("hybrid_ms", "dynamic-range ms"),
                ("hybrid_ns_per_flop", "dynamic-range ns per FLOP"),
                ("hybrid_over_float", "dynamic-range / float")]
        stem = "cpu-hybrid-ops" + (f"-{a.tag}" if a.tag else "")
        print(write_results(stem, {"device": _host_cpu()}, rows, cols, Path(a.out)))
        return 0
    for runtime in available_runtimes():
        for threads in (int(t) for t in a.threads.split(",")):
            base = _ms(_model(None, a.float), runtime, threads, a.runs)
            for op in FLOAT_OPS if a.float else OPS:
                ms = _ms(_model(op, a.float), runtime, threads, a.runs)
                row = {"runtime": runtime, "threads": threads, "op": op.upper(),
                       "ms": ms, "conv_ms": base, "ns_per_element": (ms - base) * 1e6 / elements}
                rows.append(row)
                print(row)
    meta = {"device": _host_cpu(), "elements": elements}
    cols = [("runtime", "runtime"), ("threads", "threads"), ("op", "op"),
            ("conv_ms", "conv alone ms"), ("ms", "conv + op ms"),
            ("ns_per_element", "op ns per element")]
    stem = ("cpu-float-ops" if a.float else "cpu-int8-ops") + (f"-{a.tag}" if a.tag else "")
    print(write_results(stem, meta, rows, cols, Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
