"""Where a batched step's time goes with the delegate (default options): `set_tensor` (TFLite's
copy of the numpy input into the interpreter), `invoke` (split by the delegate's stats into
enqueueing and waiting) and `get_tensor`, each timed alone; then, from a profiling delegate, the
device's upload, compute and download per invoke. The other half of bench/batch_throughput.py's
figures: which part a faster kernel can win back.

    python bench/batch_breakdown.py MODEL.tflite [...] [--batches 8,32]

Prints one block per model and batch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_throughput import batched_interpreter  # noqa: E402


def median_ms(f: Callable[[], object], runs: int = 30) -> float:
    for _ in range(3):
        f()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batches", default="8,32")
    args = ap.parse_args(argv)
    for path in args.models:
        model = Path(path).read_bytes()
        for b in (int(v) for v in args.batches.split(",")):
            d, it, idx, x = batched_interpreter(model, b)
            out = it.get_output_details()[0]["index"]
            set_ms = median_ms(lambda: it.set_tensor(idx, x))  # noqa: B023
            invoke_ms = median_ms(it.invoke)
            get_ms = median_ms(lambda: it.get_tensor(out))  # noqa: B023
            before = d.stats()
            for _ in range(20):
                it.invoke()
            after = d.stats()
            enq = (after.host_enqueue_us - before.host_enqueue_us) / 20e3
            wait = (after.host_wait_us - before.host_wait_us) / 20e3
            dp, ip, _, _ = batched_interpreter(model, b, profiling=True)
            for _ in range(3):
                ip.invoke()
            dp.reset_profile()
            for _ in range(10):
                ip.invoke()
            parts = dp.profile().partitions
            if not parts:
                print(f"{Path(path).stem} batch {b}: the default delegates nothing here")
                continue
            p = parts[0]
            n = max(p.invokes, 1)
            up = p.upload_ms / n
            print(
                f"{Path(path).stem} batch {b}: set_tensor {set_ms:.3f} ms "
                f"({x.nbytes / set_ms / 1e6:.1f} GB/s), invoke {invoke_ms:.3f} (enqueue {enq:.3f}, "
                f"wait {wait:.3f}), get_tensor {get_ms:.3f}\n"
                f"  device per invoke: upload {up:.3f} ms ({p.upload_bytes / n / (up * 1e6):.1f} "
                f"GB/s), compute {p.compute_ms / n:.3f}, download {p.download_ms / n:.3f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
