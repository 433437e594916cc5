"""Fits the cost model's CPU side (src_cpp/delegate/cpu_costs.cc) to measured CPU times.

The model: XNNPACK runs each node in max(FLOP / (rate x threads), bytes / (bandwidth x threads))
plus a fixed hand-off per node; an int8 node's FLOP count 1/1.5. bytes: every input (weights
included) and output of the node. The measured times are the `cpu_ms` of never_slower.py's
JSON files (their meta names the thread count); the models are read from --dir folders (and
--small: bench/small_models.py's set, built here). The fit minimises a soft-L1 loss of the log
ratio (a few models XNNPACK runs far off any roofline, e.g. TRANSPOSE_CONV outside its
partitions, must not pull the rest), by a coarse-to-fine grid: numpy only.

Given tables of several thread counts (never_slower.py --threads T), it fits one thread model
to them all instead: one thread's rate and bandwidth, both grown as t^exponent on t threads,
and a hand-off per node of SINGLE us on one thread (XNNPACK makes no pool) and BASE +
PER_THREAD x t us in a pool of t (bench/results/cpu-threads-*.md).

    python bench/fit_cpu_costs.py --results bench/results/never-slower-NVIDIA_H200.json \\
        --results bench/results/never-slower-converted-NVIDIA_H200.json \\
        --dir MODELS ... [--small] [--exclude NAME] [--params RATE,BW,NODE_US]
        [--threads-params RATE,BW,EXPONENT,SINGLE,BASE,PER_THREAD]
        [--out bench/results/cpu-costs-H200.md]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import tflite

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models  # noqa: E402

from clgpu_delegate.modelgen import zoo  # noqa: E402

_OPS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if isinstance(v, int)}
_BYTES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 7: 2, 9: 1, 10: 8}  # TensorType -> element bytes
INT8_SPEEDUP = 1.5  # as the cost model


def node_features(data: bytes) -> np.ndarray:
    """Rows (FLOP, bytes, int8) per node of the main subgraph; FLOP as the ops' NodeWork."""
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)

    def shape(t: int) -> list[int]:
        return [int(d) for d in g.Tensors(t).ShapeAsNumpy()] if g.Tensors(t).ShapeLength() else []

    def count(t: int) -> int:
        return int(np.prod(shape(t))) if t >= 0 else 0

    rows = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = _OPS.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "")
        ins = [int(t) for t in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(t) for t in op.OutputsAsNumpy()] if op.OutputsLength() else []
        o = count(outs[0]) if outs else 0
        flop = float(o)
        if name == "CONV_2D" and len(ins) > 1:
            w = shape(ins[1])
            flop = 2.0 * o * w[1] * w[2] * w[3]
        elif name == "DEPTHWISE_CONV_2D" and len(ins) > 1:
            w = shape(ins[1])
            flop = 2.0 * o * w[1] * w[2]
        elif name == "FULLY_CONNECTED" and len(ins) > 1:
            flop = 2.0 * o * (shape(ins[1]) or [1])[-1]
        elif name == "BATCH_MATMUL" and len(ins) > 1:
            flop = 2.0 * o * shape(ins[0])[-1]
        elif name == "TRANSPOSE_CONV" and len(ins) > 2:
            w = shape(ins[1])
            flop = 2.0 * count(ins[2]) * w[0] * w[1] * w[2]
        elif name in ("MEAN", "SUM", "AVERAGE_POOL_2D", "MAX_POOL_2D") and ins:
            flop = float(count(ins[0]))
        nbytes = sum(count(t) * _BYTES.get(g.Tensors(t).Type(), 4) for t in ins + outs if t >= 0)
        int8 = bool(outs) and g.Tensors(outs[0]).Type() in (3, 9)
        rows.append((flop, float(nbytes), float(int8)))
    return np.array(rows)


def _soft_l1(r: np.ndarray) -> np.ndarray:
    z = (r / 0.2) ** 2
    return 2 * (np.sqrt(1 + z) - 1)


def roofline_ms(feats: np.ndarray, rate: float, bw: float) -> float:
    """The nodes' arithmetic or traffic, whichever is longer, at rate GFLOP/s and bw GB/s."""
    flop = feats[:, 0] / np.where(feats[:, 2] > 0, INT8_SPEEDUP, 1.0)
    return float(np.maximum(flop / (rate * 1e9), feats[:, 1] / (bw * 1e9)).sum() * 1e3)


def predict_ms(feats: np.ndarray, rate: float, bw: float, node_us: float, threads: int) -> float:
    return roofline_ms(feats, rate, bw) / threads + len(feats) * node_us * 1e-3


def fit(models: dict[str, np.ndarray], measured: dict[str, float], threads: int) -> tuple:
    names = sorted(measured)

    def loss(p: tuple[float, float, float]) -> float:
        r = np.array([np.log(predict_ms(models[n], *p, threads) / measured[n]) for n in names])
        return float(np.sum(_soft_l1(r)))

    grid = (np.geomspace(5, 200, 12), np.geomspace(1, 100, 12), np.geomspace(0.5, 20, 12))
    best = min(itertools.product(*grid), key=loss)
    for _ in range(4):  # refine around the best point
        grid = tuple(np.geomspace(v / 1.6, v * 1.6, 9) for v in best)
        best = min(itertools.product(*grid), key=loss)
    return best


def node_us_at(t: np.ndarray, single: float, base: float, per_thread: float) -> np.ndarray:
    """The hand-off per node: none to speak of on one thread (XNNPACK makes no pool), and
    growing with the pool's threads."""
    return np.where(t > 1, base + per_thread * t, single)


def predict_threads_ms(feats: np.ndarray, t: int, p: tuple) -> float:
    """At t threads: arithmetic and bandwidth grow as t ** exponent, the node hand-off as
    node_us_at. p = (rate, bandwidth, exponent, single, base, per_thread): rate and bandwidth
    of one thread."""
    rate, bw, exponent, *node = p
    return float(
        roofline_ms(feats, rate, bw) / t**exponent
        + len(feats) * node_us_at(np.array(t), *node) * 1e-3
    )


def fit_threads(models: dict[str, np.ndarray], measured: dict[tuple[str, int], float]) -> tuple:
    """One thread model for every thread count measured (coarse-to-fine grid, numpy only)."""
    keys = sorted(measured)
    ts = np.array([t for _, t in keys], dtype=float)
    nodes = np.array([len(models[n]) for n, _ in keys], dtype=float)
    y = np.log([measured[k] for k in keys])
    names = sorted({n for n, _ in keys})
    idx = np.array([names.index(n) for n, _ in keys])

    def best_of(grid: tuple) -> tuple:
        top = (np.inf, None)
        single, base, per = np.meshgrid(*grid[3:], indexing="ij")
        node_one = single.reshape(-1, 1)  # (nodes grid, 1)
        node_pool = (base.reshape(-1, 1) + per.reshape(-1, 1) * ts)  # (nodes grid, keys)
        node = np.where(ts > 1, node_pool, node_one) * nodes * 1e-3
        for rate, bw in itertools.product(grid[0], grid[1]):
            s = np.array([roofline_ms(models[n], rate, bw) for n in names])[idx]
            for e in grid[2]:
                pred = s / ts**e + node
                loss = _soft_l1(np.log(pred) - y).sum(axis=1)
                i = int(np.argmin(loss))
                if loss[i] < top[0]:
                    top = (loss[i], (rate, bw, e, single.flat[i], base.flat[i], per.flat[i]))
        return top[1]

    grid = (np.geomspace(20, 300, 10), np.geomspace(2, 100, 10), np.linspace(0.5, 1.0, 11),
            np.geomspace(0.05, 5, 8), np.geomspace(0.2, 6, 8), np.geomspace(0.01, 0.6, 8))
    best = best_of(grid)
    for _ in range(3):
        grid = tuple(np.geomspace(v / 1.4, v * 1.4, 7) for v in best)
        best = best_of(grid)
    return best


def threads_report(models: dict[str, np.ndarray], measured: dict[tuple[str, int], float],
                   p: tuple, command: str) -> str:
    counts = sorted({t for _, t in measured})
    rate, bw, e, single, base, per = p
    lines = [
        f"# CPU cost fit over thread counts {counts}: {len({n for n, _ in measured})} models",
        "",
        f"one thread: {rate:.1f} GFLOP/s, {bw:.1f} GB/s; t threads: those x t^{e:.2f}; per node "
        f"{single:.2f} us on one thread, {base:.2f} + {per:.3f} x t us in a pool",
        "",
        f"command: `{command}`",
        "",
        "| threads | median \\|log(fitted / measured)\\| | median fitted / measured |",
        "|---|---|---|",
    ]
    for t in counts:
        r = np.array([np.log(predict_threads_ms(models[n], t, p) / v)
                      for (n, tt), v in measured.items() if tt == t])
        lines.append(f"| {t} | {np.median(np.abs(r)):.3f} | {np.exp(np.median(r)):.2f} |")
    lines += ["", "| model | nodes | " + " | ".join(f"{t} thr ms (fit)" for t in counts) + " |",
              "|---|---|" + "---|" * len(counts)]
    for n in sorted({n for n, _ in measured}):
        cells = []
        for t in counts:
            v = measured.get((n, t))
            cells.append(f"{v:.3f} ({predict_threads_ms(models[n], t, p):.3f})" if v else "")
        lines.append(f"| {n} | {len(models[n])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", action="append", required=True, help="never_slower JSON")
    ap.add_argument("--dir", action="append", default=[], help="folder of the rows' models")
    ap.add_argument("--small", action="store_true", help="build bench/small_models.py's set")
    ap.add_argument("--exclude", action="append", default=[], help="a model left out")
    ap.add_argument("--params", help="RATE,BANDWIDTH,NODE_US: evaluate these instead of fitting")
    ap.add_argument(
        "--threads-params",
        help="RATE,BANDWIDTH,EXPONENT,SINGLE_US,BASE_US,PER_THREAD_US: evaluate the thread model",
    )
    ap.add_argument("--out", help="markdown file to write")
    args = ap.parse_args(argv)
    data = {m: zoo.path(m).read_bytes() for m in zoo.MODELS}
    for folder in args.dir:
        data.update({p.stem: p.read_bytes() for p in Path(folder).glob("*.tflite")})
    if args.small:
        data.update({n: make() for n, make in small_models.models().items()})
    by_threads: dict[tuple[str, int], float] = {}
    for path in args.results:
        doc = json.loads(Path(path).read_text())
        t = int(doc["meta"].get("threads", doc["meta"].get("cpu_threads", 16)))
        for r in doc["rows"]:
            if r.get("cpu_ms") and r["model"] in data and r["model"] not in args.exclude:
                by_threads[(r["model"], t)] = r["cpu_ms"]
    threads = {t for _, t in by_threads}
    if len(threads) > 1 or args.threads_params:  # the thread model, fitted on them all
        models = {n: node_features(data[n]) for n, _ in by_threads}
        p = (tuple(float(v) for v in args.threads_params.split(","))
             if args.threads_params else fit_threads(models, by_threads))
        text = threads_report(
            models, by_threads, p, "python bench/fit_cpu_costs.py " + " ".join(argv or sys.argv[1:])
        )
        print(text)
        if args.out:
            Path(args.out).write_text(text)
        return 0
    t = threads.pop()
    measured = {n: v for (n, _), v in by_threads.items()}
    models = {n: node_features(data[n]) for n in measured}
    if args.params:
        rate, bw, node_us = (float(v) for v in args.params.split(","))
    else:
        rate, bw, node_us = fit(models, measured, t)
    lines = [
        f"# CPU cost {'check' if args.params else 'fit'}: {len(measured)} models, {t} threads",
        "",
        f"rate {rate:.1f} GFLOP/s per thread, bandwidth {bw:.1f} GB/s per thread, "
        f"{node_us:.2f} us per node",
        "",
        f"command: `python bench/fit_cpu_costs.py {' '.join(argv or sys.argv[1:])}`",
        "",
        "| model | nodes | measured ms | fitted ms | fitted / measured |",
        "|---|---|---|---|---|",
    ]
    errs = []
    for n in sorted(measured):
        p = predict_ms(models[n], rate, bw, node_us, t)
        errs.append(abs(np.log(p / measured[n])))
        lines.append(f"| {n} | {len(models[n])} | {measured[n]:.3f} | {p:.3f} | "
                     f"{p / measured[n]:.2f} |")
    logs = np.log([predict_ms(models[n], rate, bw, node_us, t) / measured[n] for n in measured])
    bias = float(np.median(logs))
    lines.insert(
        4,
        f"\nmedian |log(fitted / measured)|: {np.median(errs):.3f}; median fitted / measured "
        f"(the host's bias) {np.exp(bias):.2f}; spread around it (median |log ratio - log "
        f"bias|) {np.median(np.abs(logs - bias)):.3f}\n",
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
