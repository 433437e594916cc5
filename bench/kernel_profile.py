"""Per-kernel device times of one model on the delegate (`partitioning="all"`, profiling events):
each kernel of an invoke with its node, op, algorithm and shape, and the mean of its event time
over the timed invokes. What a fold changes on the device side, layer by layer, when the invoke
itself is bound by the host (bench_host_bound.py): compare two builds' tables.

    python bench/kernel_profile.py MODEL [--runs 100] [--warmup 20] [--batch N] [--tag NAME]
        [--option key=value ...] [--out bench/results]

Event times include each launch's own overhead on the device; the invoke without profiling is
shorter than their sum. Writes kernel-profile[-TAG]-<device>.json and .md (device, driver, date,
command).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def profile(
    model: str, runs: int, warmup: int, batch: int = 0, options: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], float]:
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(**{"partitioning": "all", **(options or {}), "profiling": True})
    it = make_interpreter(model, [d])
    if batch:  # axis 0 of every input, as bench/batch_throughput.py resizes
        for det in it.get_input_details():
            it.resize_tensor_input(det["index"], [batch, *det["shape"][1:]])
    it.allocate_tensors()
    d.wait_ready()
    rng = np.random.default_rng(0)
    for det in it.get_input_details():
        x = rng.standard_normal(det["shape"])
        if np.issubdtype(det["dtype"], np.integer):
            x = np.clip(x * 40, -128, 127)
        it.set_tensor(det["index"], x.astype(det["dtype"]))
    for _ in range(warmup):
        it.invoke()
    d.reset_profile()
    for _ in range(runs):
        it.invoke()
    p = d.profile()
    rows = [
        {
            "node": k.node,
            "op": k.op,
            "algorithm": k.algorithm,
            "us": round(k.mean_ms * 1e3, 2),
            "shape": k.shape,
        }
        for k in p.kernels
    ]
    return rows, p.kernel_ms_per_invoke()


def _option(text: str) -> tuple[str, Any]:
    """KEY=VALUE, the value an int where it reads as one."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--option takes KEY=VALUE, not {text!r}")
    try:
        return key, int(value)
    except ValueError:
        return key, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a .tflite path")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=0, help="resize axis 0 of the inputs to this")
    ap.add_argument("--tag", default="")
    ap.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a load() option"
    )
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    options = dict(_option(o) for o in args.option)
    rows, total = profile(args.model, args.runs, args.warmup, args.batch, options)
    sys.path.insert(0, str(HERE))
    from _common import device_info, write_results

    meta = {
        **device_info(),
        "model": Path(args.model).name,
        "batch": args.batch or "the model's",
        "kernels_per_invoke": len(rows),
        "device_ms_per_invoke": round(total, 4),
        "runs": args.runs,
        **({"options": options} if options else {}),
    }
    cols = [
        ("node", "node"),
        ("op", "op"),
        ("algorithm", "algorithm"),
        ("us", "mean us"),
        ("shape", "shape"),
    ]
    stem = "kernel-profile" + (f"-{args.tag}" if args.tag else "")
    print(f"{meta['model']}: {len(rows)} kernels, {total:.4f} ms of device time per invoke")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
