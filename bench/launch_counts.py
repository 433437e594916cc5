"""The cost model's kernel count against the kernels each partition launches per invoke, on real
models on this machine's device (#40's rule, which tests/test_launch_counts.py checks on the test
machine's device): the zoo at its default sizes and every .tflite under the --dir folders.

    python bench/launch_counts.py [--zoo lenet5,mobilenet_v2] [--dir DIR ...] [--out DIR] [--tag T]

Writes bench/results/launch-counts[-T]-<device>.json and .md; a row is a model, "match" says whether
the estimate's kernels (summed over the partitions it weighed in the main subgraph) equal the
launches of one invoke with partitioning="all"; a control-flow model's other subgraphs (IF
branches, WHILE bodies), which an invoke runs or not, have their estimates in a column of their
own. Models the CPU reference cannot run are listed with the error.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, device_info, write_results

import clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter

ZOO = "lenet5,mobilenet_v1,mobilenet_v2,inception_v1,inception_v3,resnet50,alexnet,pynet"


def feeds(interp: Any, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in interp.get_input_details():
        if np.issubdtype(d["dtype"], np.floating):
            out.append(rng.standard_normal(d["shape"]).astype(d["dtype"]))
        else:
            info = np.iinfo(d["dtype"])
            out.append(rng.integers(max(info.min, -100), min(info.max, 100), d["shape"]).astype(
                d["dtype"]))
    return out


def invoke(interp: Any, seed: int) -> None:
    for d, x in zip(interp.get_input_details(), feeds(interp, seed), strict=True):
        interp.set_tensor(d["index"], x)
    interp.invoke()


def row(name: str, model: bytes) -> dict[str, Any]:
    d = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [d], reference=True).allocate_tensors()
    # Per subgraph: a control-flow model's branches are delegated too, and one invoke runs the
    # main subgraph and only the branches it takes; its count is the main subgraph's.
    texts = {(x.subgraph, x.reason + " " + x.note) for x in d.decisions()}
    per_subgraph: collections.Counter[int] = collections.Counter()
    for sub, t in texts:
        per_subgraph[sub] += sum(int(n) for n in re.findall(r"\((\d+) kernels\)", t))
    estimated = per_subgraph[0]
    other = sum(v for sub, v in per_subgraph.items() if sub != 0)
    a = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [a], reference=True)
    it.allocate_tensors()
    a.wait_ready()
    invoke(it, 0)
    a.reset_profile()
    invoke(it, 1)
    kernels = a.profile().kernels
    launched = sum(k.count for k in kernels)
    by_op = collections.Counter()
    for k in kernels:
        by_op[f"{k.op}/{k.algorithm}"] += k.count
    r = {"model": name, "estimated": estimated, "launched": launched,
         "partitions": len(a.partitions()), "match": "yes" if estimated == launched else "NO"}
    if other:
        r["other subgraphs"] = other
    if r["match"] == "NO":
        r["launches by op"] = ", ".join(f"{k} {v}" for k, v in sorted(by_op.items()))
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", default=ZOO)
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--tag", default="", help="launch-counts-TAG-<device> (a named set)")
    args = ap.parse_args(argv)
    models = [(n, zoo.path(n)) for n in args.zoo.split(",") if n]
    models += [(p.stem, p) for d in args.dir for p in sorted(Path(d).glob("*.tflite"))]
    rows = []
    for name, path in models:
        try:
            r = row(name, Path(path).read_bytes())
        except Exception as e:  # noqa: BLE001 - a model the reference cannot run is listed
            r = {"model": name, "match": "error: " + str(e).splitlines()[0][:120]}
        rows.append(r)
        print(r, flush=True)
    ran = [r for r in rows if r["match"] in ("yes", "NO")]
    meta = {**device_info(), "matching": f"{sum(r['match'] == 'yes' for r in ran)} of {len(ran)}"}
    meta["command"] = " ".join(["python", *sys.argv])
    columns = [("model", "model"), ("estimated", "estimated kernels (main subgraph)"),
               ("other subgraphs", "estimated in other subgraphs (branches, bodies)"),
               ("launched", "launched per invoke"), ("partitions", "partitions (all)"),
               ("match", "match"), ("launches by op", "launches by op (mismatches)")]
    stem = f"launch-counts-{args.tag}" if args.tag else "launch-counts"
    write_results(stem, meta, rows, columns, Path(args.out))
    print(meta["matching"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
