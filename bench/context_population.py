"""Does a launch cost the host more when the OpenCL context holds more buffers, or when its own
buffers were made before others? Two delegates of one plan in one process differ by up to 16 %
(instance-spread-*.md), and the one made first was the slower more often (never-slower-*.json:
of the rows whose two columns run one plan, 18 of 1000 over 1.05 with the default's delegate made
first against 5 of 1018 with `all`'s). This asks the driver alone, without a delegate: ctypes on
the OpenCL library, as bench/enqueue_probe.py.

Each case makes 25 kernel objects of 8 buffer arguments each (200 buffers, "ours"), and
`extra` other buffers, each written once so that the driver places it, made before ours or after
them; then times bursts of 25 launches (an invoke of a small model) and releases everything.
"pair" cases make two such sets, A then B, and time them in alternate bursts: a second delegate
made after the first. Cases run in a shuffled order, `--rounds` times.

    python bench/context_population.py [--launches 2000] [--rounds 3] [--tag T] [--out DIR]

Writes context-population[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import ctypes as C
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from enqueue_probe import BURST, ITEMS, Driver, _source, probe_main  # noqa: E402

KERNELS, ARGS = 25, 8
EXTRAS = (0, 1000, 4000, 16000)


class Set:
    """25 kernel objects with 8 buffers of their own each."""

    def __init__(self, drv: Driver, source: str) -> None:
        self.kernels = drv.kernels(source, [f"k{k}" for k in range(KERNELS)])
        self.buffers: list[C.c_void_p] = []
        for kernel in self.kernels:
            own = [drv.buffer() for _ in range(ARGS)]
            drv.set_buffers(kernel, own)
            self.buffers += own


def _touch(drv: Driver, buffers: list[C.c_void_p]) -> None:
    one = C.c_float(1.0)
    for b in buffers:
        drv.check(
            drv.cl.clEnqueueFillBuffer(
                drv.q,
                b,
                C.byref(one),
                C.c_size_t(4),
                C.c_size_t(0),
                C.c_size_t(ITEMS * 4),
                0,
                None,
                None,
            ),
            "clEnqueueFillBuffer",
        )
    drv.cl.clFinish(drv.q)


def _burst(drv: Driver, s: Set) -> float:
    """Host time (us) to enqueue one burst of 25 launches, then the wait."""
    cl = drv.cl
    t0 = time.perf_counter()
    for i, kernel in enumerate(s.kernels):
        drv.check(
            cl.clEnqueueNDRangeKernel(drv.q, kernel, 1, None, drv.gsz, drv.lsz, 0, None, None),
            "clEnqueueNDRangeKernel",
        )
        if i == 1 or i % 16 == 15:
            cl.clFlush(drv.q)
    t = time.perf_counter() - t0
    cl.clFinish(drv.q)
    return t * 1e6 / BURST


def _release(drv: Driver, s: Set | None, extra: list[C.c_void_p]) -> None:
    for b in (s.buffers if s else []) + extra:
        drv.cl.clReleaseMemObject(b)
    for k in s.kernels if s else []:
        drv.cl.clReleaseKernel(k)


def _case(drv: Driver, source: str, extra: int, order: str, bursts: int) -> dict[str, Any]:
    others: list[C.c_void_p] = []
    if order == "before":
        others = [drv.buffer() for _ in range(extra)]
    a = Set(drv, source)
    b = Set(drv, source) if order == "pair" else None
    if order == "after":
        others = [drv.buffer() for _ in range(extra)]
    _touch(drv, others + a.buffers + (b.buffers if b else []))
    for _ in range(20):  # warm-up
        _burst(drv, a)
        if b:
            _burst(drv, b)
    ta, tb = [], []
    for _ in range(bursts):
        ta.append(_burst(drv, a))
        if b:
            tb.append(_burst(drv, b))
    _release(drv, a, others)
    _release(drv, b, [])
    row = {"extra": extra, "order": order, "us_per_launch": statistics.median(ta)}
    if b:
        row["second_us_per_launch"] = statistics.median(tb)
        row["first_over_second"] = row["us_per_launch"] / row["second_us_per_launch"]
    return row


def run(launches: int, rounds: int, seed: int = 0) -> list[dict[str, Any]]:
    drv = Driver()
    source = _source(KERNELS, ARGS)
    cases = [(e, o) for e in EXTRAS for o in ("before", "after")] + [(0, "pair")] * 2
    rng = random.Random(seed)
    rows = []
    for r in range(rounds):
        rng.shuffle(cases)
        for extra, order in cases:
            row = {"round": r, **_case(drv, source, extra, order, max(1, launches // BURST))}
            rows.append(row)
            print(row, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    columns = [
        ("round", "round"),
        ("order", "ours made"),
        ("extra", "other buffers"),
        ("us_per_launch", "enqueue us per launch"),
        ("second_us_per_launch", "second set's us per launch"),
        ("first_over_second", "first / second"),
    ]
    meta = {"kernels": KERNELS, "buffer_args": ARGS}
    return probe_main(argv, __doc__, "context-population", run, columns, meta)


if __name__ == "__main__":
    sys.exit(main())
