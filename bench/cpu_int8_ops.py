"""The CPU's time per element of int8 element-wise ops, as the interpreter runs them (XNNPACK
where it takes the op, TFLite's own kernel where it does not): the figure the cost model's CPU
side gives an op that XNNPACK leaves (OpHandler::cpu_int8_ns_per_element). Each op follows an
int8 1x1 conv to a 56 x 56 x 64 map; its time is the model's less that of the conv alone.

    python bench/cpu_int8_ops.py [--threads 1,2] [--runs 40] [--tag NAME] [--out bench/results]
    (int8 HARD_SWISH, LOGISTIC, TANH, RELU, MIRROR_PAD)
    python bench/cpu_int8_ops.py --float ...   # float MIRROR_PAD (XNNPACK leaves it), PAD, ...
    python bench/cpu_int8_ops.py --hybrid ...  # dynamic-range CONV_2D, DEPTHWISE, FC vs float
    python bench/cpu_int8_ops.py --builtin ... # int8 ops and forms XNNPACK leaves (pools, ...)

Writes cpu-int8-ops[-TAG]-<host CPU>.json and .md (cpu-float-ops with --float: the figure is
OpHandler::cpu_float_ns_per_element's; cpu-hybrid-ops with --hybrid: each op alone on a 56 x 56
x 64 map, or a 2048 -> 3072 FC, in float and in TF's dynamic-range form, whose int8 weights
TFLite's own hybrid kernels read: OpHandler::cpu_hybrid_ns_per_flop's figure) with the
interpreter's runtime, its threads, date and command; cpu-int8-builtin with --builtin: int8
AVERAGE_POOL_2D and SOFTMAX per output element, DEPTHWISE_CONV_2D with a depth multiplier per
output pixel x input channel x filter tap, each after the 1x1 conv. Sweeps over shapes (int8
convolutions, few-channel ops) are bench/cpu_op_sweep.py's.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402

SHAPE = (1, 56, 56, 64)
OPS = ("hard_swish", "logistic", "tanh", "relu", "mirror_pad")
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
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from clgpu_delegate.runtime import available_runtimes

    elements = int(np.prod(SHAPE))
    rows: list[dict[str, Any]] = []
    def sweep(rows_at: Any) -> list[dict[str, Any]]:  # every runtime, every --threads
        return [row for runtime in available_runtimes() for t in a.threads.split(",")
                for row in rows_at(runtime, int(t), a.runs)]

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
