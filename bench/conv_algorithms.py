"""The selector inside whole models: every conv node of the zoo models timed under each forced
algorithm and under the selector's own pick, per node, from the OpenCL event profile.

    python bench/conv_algorithms.py [--models mobilenet_v2,resnet50] [--runs 20] [--size N]
                                    [--out DIR]

A forced algorithm that does not apply to a node (GEMM on a 3x3 conv) leaves that node to the
selector, and its cell stays empty. Per model: the selector's total against the best algorithm
per node, and on how many conv nodes its pick is within 10 % (or 2 us) of that best.
Writes bench/results/conv-algorithms-<device>.md/.json.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, device_info, write_results

import clgpu_delegate as cd
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter

MODELS = ["mobilenet_v1", "mobilenet_v2", "inception_v1", "inception_v3", "resnet50", "pynet"]
ALGORITHMS = ["gemm", "implicit_gemm", "winograd4", "direct_blocked", "winograd4_fused"]
CONV_OPS = {"CONV_2D"}


def node_times(model: bytes, runs: int, algorithm: str) -> dict[int, dict[str, Any]]:
    """Per conv node: kernel ms per invoke (all its kernels) and the algorithm that ran."""
    d = cd.load(partitioning="all", profiling=True, conv_algorithm=algorithm)
    it = make_interpreter(model, [d])
    it.allocate_tensors()
    det = it.get_input_details()[0]
    x = np.random.default_rng(0).standard_normal(det["shape"]).astype(np.float32)
    it.set_tensor(det["index"], x)
    for _ in range(3):
        it.invoke()
    d.reset_profile()
    for _ in range(runs):
        it.invoke()
    prof = d.profile()
    nodes: dict[int, dict[str, Any]] = defaultdict(lambda: {"ms": 0.0})
    for k in prof.kernels:
        if k.op not in CONV_OPS:
            continue
        r = nodes[k.node]
        r["ms"] += k.total_ms / prof.invokes()
        r["shape"] = k.shape
        r["algorithm"] = k.algorithm.split("+")[0]  # "gemm+ADD": a folded residual ADD
    del it
    d.close()
    return dict(nodes)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--size", type=int, default=0, help="input size (0: each model's default)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    rows, meta_models = [], {}
    for name in args.models.split(","):
        model = zoo.build(name, **({"size": args.size} if args.size else {}))
        auto = node_times(model, args.runs, "auto")
        forced = {a: node_times(model, args.runs, a) for a in ALGORITHMS}
        auto_ms = best_ms = 0.0
        ok = 0
        for node, r in sorted(auto.items()):
            row = {"model": name, "node": node, "shape": r["shape"], "selected": r["algorithm"],
                   "selected_ms": r["ms"]}
            times = {r["algorithm"]: r["ms"]}
            for a, nodes in forced.items():
                f = nodes.get(node)
                if f and f["algorithm"] == a:  # it applied
                    row[f"{a}_ms"] = f["ms"]
                    times[a] = min(times.get(a, f["ms"]), f["ms"])
            best = min(times, key=times.get)
            row["best"], row["best_ms"] = best, times[best]
            row["within_10pct"] = r["ms"] <= max(1.1 * times[best], times[best] + 0.002)
            ok += row["within_10pct"]
            auto_ms += r["ms"]
            best_ms += times[best]
            rows.append(row)
        meta_models[name] = (f"selector {auto_ms:.3f} ms of convs per invoke, best per node "
                             f"{best_ms:.3f} ms, pick within 10% on {ok}/{len(auto)} nodes")
        print(name, meta_models[name], flush=True)
    meta = device_info() | {"runs": args.runs, "size": args.size or "default",
                            "timing": "device time of each node's kernels (OpenCL events), "
                                      "mean per invoke"} | meta_models
    cols = [("model", "model"), ("node", "node"), ("shape", "shape"),
            ("selected", "selector"), ("selected_ms", "selector ms")]
    cols += [(f"{a}_ms", f"{a} ms") for a in ALGORITHMS]
    cols += [("best", "best"), ("within_10pct", "pick within 10%")]
    print(write_results("conv-algorithms", meta, rows, cols, Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
