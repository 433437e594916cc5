"""The CPU's time per element of int8 element-wise ops, as the interpreter runs them (XNNPACK
where it takes the op, TFLite's own kernel where it does not): the figure the cost model's CPU
side gives an op that XNNPACK leaves (OpHandler::cpu_int8_ns_per_element). Each op follows an
int8 1x1 conv to a 56 x 56 x 64 map; its time is the model's less that of the conv alone.

    python bench/cpu_int8_ops.py [--threads 1,2] [--runs 40] [--tag NAME] [--out bench/results]
    python bench/cpu_int8_ops.py --float ...   # float MIRROR_PAD (XNNPACK leaves it), PAD, ...

Writes cpu-int8-ops[-TAG]-<host CPU>.json and .md (cpu-float-ops with --float: the figure is
OpHandler::cpu_float_ns_per_element's) with the interpreter's runtime, its threads, date and
command.
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
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from clgpu_delegate.runtime import available_runtimes

    elements = int(np.prod(SHAPE))
    rows: list[dict[str, Any]] = []
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
