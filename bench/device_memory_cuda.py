"""Device memory a delegated model really takes on an NVIDIA GPU, under each activation arena,
counted by the CUDA driver (device-wide free memory before and after), not by the delegate.

    python bench/device_memory_cuda.py [--models pynet,mobilenet_v2] [--arenas svm,shared]

Each (model, arena) runs in its own process (CLGPU_ARENA set), twice. Shows whether views into
one SVM allocation (NVIDIA's default arena) really save what delegate.memory() reports against
whole shared buffers. Needs libcuda.so.1 (NVIDIA's driver). The CUDA driver counts in 2 MiB
pages; "delta MB" includes weights, scratch and the driver's own buffers.
Writes bench/results/device-memory-<device>.md/.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import RESULTS, device_info, write_results


def _child(model_name: str) -> None:
    import numpy as np

    import clgpu_delegate as cd
    from clgpu_delegate.modelgen import zoo
    from clgpu_delegate.runtime import make_interpreter

    cu = ctypes.CDLL("libcuda.so.1")
    if cu.cuInit(0) != 0:
        raise SystemExit("cuInit failed")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)

    def free_bytes() -> int:
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        cu.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t))
        return f.value

    d = cd.load(partitioning="all")
    before = free_bytes()
    it = make_interpreter(str(zoo.path(model_name)), [d])
    it.allocate_tensors()
    det = it.get_input_details()[0]
    it.set_tensor(det["index"], np.zeros(det["shape"], np.float32))
    it.invoke()
    after = free_bytes()
    m = d.memory()
    print(json.dumps({"delta_mb": (before - after) / 2**20,
                      "activations_mb": m.allocated_bytes / 2**20,
                      "lower_bound_mb": m.lower_bound_bytes / 2**20,
                      "weights_mb": m.weight_bytes / 2**20,
                      "arena": m.partitions[0].arena}))


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="pynet,mobilenet_v2")
    ap.add_argument("--arenas", default="svm,shared")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        for arena in args.arenas.split(","):
            for _ in range(2):
                o = subprocess.run([sys.executable, __file__, "--child", name],
                                   env=dict(os.environ, CLGPU_ARENA=arena),
                                   capture_output=True, text=True)
                if o.returncode:
                    print(o.stderr[-2000:])
                    return 1
                row = {"model": name} | json.loads(o.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(row, flush=True)
    cols = [("model", "model"), ("arena", "arena"), ("activations_mb", "activations MB (ours)"),
            ("lower_bound_mb", "lower bound MB"), ("weights_mb", "weights MB"),
            ("delta_mb", "device memory taken MB (CUDA)")]
    meta = device_info() | {"counted by": "cuMemGetInfo before/after the interpreter's "
                                          "allocate_tensors + first invoke"}
    print(write_results("device-memory", meta, rows, cols, Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
