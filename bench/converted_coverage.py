"""How the delegate handles the models today's converters make (bench/convert_models.py): per
model and runtime, the partitions, the nodes it claims, the ops left on the CPU with the
delegate's reasons, and the outputs against the stock CPU kernels; then the gaps ranked by how
many models each blocks.

    python bench/converted_coverage.py [DIR] [--runtimes tflite_runtime,ai_edge_litert]
        [--name converted-coverage-pocl] [--timeout S] [--mem-gb G]

DIR (default ~/.cache/clgpu_delegate/converted-models) holds <converter>_<model>.tflite. Each
model is tried on each runtime: one a runtime cannot load (tflite_runtime 2.14 refuses op
versions newer than it knows) is recorded as such. Two delegates: partitioning="all" with
cpu_warmup=False (everything the delegate can run, the coverage) and the default options (what a
user gets). Each model runs in a subprocess under an address-space limit and a timeout, so one
that exhausts memory or hangs is a row, not the end of the run.

Parity: the largest absolute output difference over the largest |reference output|, and whether
every output meets its rule: the tests' fp32 rule for float models (tests/parity.py: |err| <=
1e-4 |ref| + 1e-5 max(1, peak)), and for dynamic-range (_dq) models docs/numerics.md's bound
against TFLite's hybrid kernels (3 % of the output's peak: those kernels quantize the
activations on the fly, the delegate computes in float on the dequantized weights).

Writes bench/results/<name>.{json,md}.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_DIR = Path("~/.cache/clgpu_delegate/converted-models").expanduser()
RESULTS = Path(__file__).resolve().parent / "results"
RUNTIMES = ("tflite_runtime", "ai_edge_litert")
FP32_RTOL, FP32_ATOL_FRACTION = 1e-4, 1e-5  # tests/parity.py's fp32 rule
HYBRID_ATOL_FRACTION = 0.03  # docs/numerics.md, "Dynamic-range (hybrid) models"
FEW_PARTITIONS = 3
# Numbers on their own (shapes, sizes, node ids), not those of type names (float32, int8).
_NUMBER = re.compile(r"(?<![A-Za-z_\d])-?\d+(\.\d+)?")
# A tensor's name (the converter's, one per node), as a reason names a tensor or weights.
_TENSOR = re.compile(r"\b(tensor|weights) \S+")


# ---- the subprocess: one model on one runtime ------------------------------------------------


def _inputs(details: list[dict[str, Any]]) -> list[np.ndarray]:
    """Seeded N(0, 1) floats; ints 0 or 1 (valid token ids and attention-mask values alike)."""
    rng = np.random.default_rng(0)
    out = []
    for d in details:
        dt = np.dtype(d["dtype"])
        shape = tuple(int(s) for s in d["shape"])
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        else:
            out.append(rng.integers(0, 2, size=shape).astype(dt))
    return out


def _invoke(interp: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    for d, x in zip(interp.get_input_details(), inputs, strict=True):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def _parity(got: list[np.ndarray], ref: list[np.ndarray], hybrid: bool) -> dict[str, Any]:
    worst, peak, ok = 0.0, 0.0, True
    for g, r in zip(got, ref, strict=True):
        r64 = r.astype(np.float64)
        err = np.abs(g.astype(np.float64) - r64)
        p = float(np.abs(r64).max(initial=0.0))
        limit = (HYBRID_ATOL_FRACTION * p if hybrid
                 else FP32_ATOL_FRACTION * max(p, 1.0) + FP32_RTOL * np.abs(r64))
        ok = ok and bool(np.all(err <= limit))  # NaN anywhere fails
        worst = max(worst, float(err.max(initial=0.0)))
        peak = max(peak, p)
    return {"max_abs_err": worst, "peak": peak, "rel_err": worst / peak if peak else worst,
            "within_rule": ok}


def _with_delegate(path: str, runtime: str, inputs: list[np.ndarray], ref: list[np.ndarray],
                   **options: Any) -> dict[str, Any]:
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    delegate = clgpu_delegate.load(**options)
    interp = make_interpreter(path, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    decisions = delegate.decisions()
    out: dict[str, Any] = {
        "device": delegate.device.name,
        "nodes": len(decisions),
        "delegated": sum(1 for d in decisions if d["delegated"]),
        "partitions": len(delegate.partitions()),
        # [op, reason, nodes]: the CPU's nodes grouped, most first
        "cpu_nodes": [[op, why, k] for (op, why), k in collections.Counter(
            (d["op_name"], d["reason"]) for d in decisions if not d["delegated"]).most_common()],
    }
    out.update(_parity(_invoke(interp, inputs), ref, Path(path).stem.endswith("_dq")))
    del interp
    return out


def one(path: str, runtime: str) -> dict[str, Any]:
    from clgpu_delegate.runtime import make_interpreter

    try:
        ref_interp = make_interpreter(path, None, runtime=runtime, reference=True)
        ref_interp.allocate_tensors()
    except Exception as e:  # noqa: BLE001 - the runtime refusing the model is the finding
        return {"status": "refused", "error": f"{type(e).__name__}: {_first_line(str(e))}"}
    inputs = _inputs(ref_interp.get_input_details())
    ref = _invoke(ref_interp, inputs)
    row: dict[str, Any] = {"status": "ok", "inputs": [list(map(int, x.shape)) for x in inputs]}
    for key, opts in (("all", {"partitioning": "all", "cpu_warmup": False}), ("default", {})):
        try:
            row[key] = _with_delegate(path, runtime, inputs, ref, **opts)
        except Exception as e:  # noqa: BLE001 - a delegate failure on one model is a row
            row[key] = {"error": f"{type(e).__name__}: {_first_line(str(e))}"}
    return row


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:300]


# ---- the driver -------------------------------------------------------------------------------


def _limit(mem_gb: float) -> Any:
    def set_limit() -> None:
        limit = int(mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return set_limit


def _spawn(path: Path, runtime: str, timeout: float, mem_gb: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", str(path), runtime]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=_limit(mem_gb))
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"past {timeout:.0f} s"}
    row: dict[str, Any]
    last = r.stdout.strip().splitlines()[-1:] if r.stdout.strip() else []
    if r.returncode == 0 and last and last[0].startswith("{"):
        row = json.loads(last[0])
    else:
        why = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        row = {"status": "crashed", "error": f"{why}: {_first_line(r.stderr)}"}
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def _reason_key(op: str, reason: str) -> str:
    """A gap as the ranking counts it: the op and its reason with the numbers (shapes, sizes,
    node ids) taken out, so one pattern on many models reads as one gap."""
    named = _TENSOR.sub(lambda m: m.group(1) + " T", reason)
    return f"{op}: {_NUMBER.sub('N', named)}"


def gaps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each missing op or pattern: the models it keeps off the delegate (on any runtime) and the
    nodes (on the runtime that loaded most: ai_edge_litert where both did)."""
    models: dict[str, set[str]] = collections.defaultdict(set)
    nodes: collections.Counter[str] = collections.Counter()
    seen: set[str] = set()
    for r in sorted(rows, key=lambda r: r["runtime"] != "ai_edge_litert"):
        res = r.get("all", {})
        counted = r["model"] in seen
        for op, reason, k in res.get("cpu_nodes", []):
            key = _reason_key(op, reason)
            models[key].add(r["model"])
            if not counted:
                nodes[key] += k
        if "cpu_nodes" in res:
            seen.add(r["model"])
    out = [{"gap": k, "follows": _follows(k.split(": ", 1)[1]), "models": len(v),
            "nodes": nodes[k], "which": sorted(v)} for k, v in models.items()]
    return sorted(out, key=lambda g: (g["follows"], -g["models"], -g["nodes"], g["gap"]))


def _follows(reason: str) -> bool:
    """A node the delegate could run but keeps with a CPU reader (a weight's DEQUANTIZE, a shape
    computation, an output also read on the CPU; clgpu_delegate/report.py): a consequence of
    another gap, ranked after the ops it follows."""
    return (reason.startswith("only a ") and "feeding" in reason) or (
        reason == "its output is also read by an op that stays on the CPU")


def headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model (best runtime): runs whole (every node, one partition), in at most
    FEW_PARTITIONS partitions, and with outputs within their rule (module docstring)."""
    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        a = r.get("all", {})
        if "delegated" in a and (r["model"] not in best or r["runtime"] == "ai_edge_litert"):
            best[r["model"]] = a
    models = sorted({r["model"] for r in rows})
    return {
        "models": len(models),
        "ran": len(best),
        "whole": sum(1 for a in best.values() if a["delegated"] == a["nodes"]
                     and a["partitions"] == 1),
        "few_partitions": sum(1 for a in best.values() if 1 <= a["partitions"] <= FEW_PARTITIONS),
        "parity": sum(1 for a in best.values() if a["within_rule"]),
        "parity_fp32_models": sum(1 for m, a in best.items() if a["within_rule"]
                                  and not m.removesuffix(".tflite").endswith("_dq")),
        "fp32_models": sum(1 for m in best if not m.removesuffix(".tflite").endswith("_dq")),
    }


def _cpu_ops(a: dict[str, Any]) -> str:
    c: collections.Counter[str] = collections.Counter()
    for op, _, k in a.get("cpu_nodes", []):
        c[op] += k
    return ", ".join(f"{op} x{k}" if k > 1 else op for op, k in c.most_common())


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], gap_list: list[dict[str, Any]],
             head: dict[str, Any], failures: dict[str, str]) -> str:
    lines = [f"# Converted-model coverage on {meta['device']}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "## Headline", "",
              f"{head['models']} models, {head['ran']} ran with the delegate; with "
              "partitioning=\"all\" (best runtime: ai_edge_litert where both load): "
              f"**{head['whole']} whole** (every node, one partition), "
              f"**{head['few_partitions']} in 1-{FEW_PARTITIONS} partitions**, "
              f"**{head['parity']} within their rule** "
              f"({head['parity_fp32_models']} of {head['fp32_models']} float models).", ""]
    lines += ["## Gaps, ranked by the models they split", "",
              "Ops the delegate does not run first; then nodes it keeps on the CPU only because "
              "their reader stays there (*follows*). Models: the files whose nodes it splits off "
              "(either runtime); nodes: over those files (ai_edge_litert's count).", "",
              "| op: reason | models | nodes | which |", "|---|---|---|---|"]
    for g in gap_list:
        which = ", ".join(m.removesuffix(".tflite") for m in g["which"])
        gap = f"*follows* {g['gap']}" if g["follows"] else g["gap"]
        lines.append(f"| {gap} | {g['models']} | {g['nodes']} | {which} |")
    lines += ["", "## Per model and runtime", "",
              "| model | runtime | all: delegated / nodes | partitions | rel err | within rule "
              "| default: delegated, partitions | left on the CPU (all) | s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["model"].removesuffix(".tflite")
        a, d = r.get("all", {}), r.get("default", {})
        if r["status"] != "ok":
            lines.append(f"| {name} | {r['runtime']} | {r['status']}: {r.get('error', '')} "
                         f"| | | | | | {r.get('seconds', '')} |")
            continue
        if "delegated" not in a:
            lines.append(f"| {name} | {r['runtime']} | delegate failed: {a.get('error')} "
                         f"| | | | | | {r.get('seconds', '')} |")
            continue
        dflt = (f"{d['delegated']}, {d['partitions']}" if "delegated" in d
                else f"failed: {d.get('error')}")
        lines.append(
            f"| {name} | {r['runtime']} | {a['delegated']} / {a['nodes']} | {a['partitions']} "
            f"| {a['rel_err']:.2e} | {'yes' if a['within_rule'] else 'no'} | {dflt} "
            f"| {_cpu_ops(a)} | {r.get('seconds', '')} |")
    if failures:
        lines += ["", "## Not converted (bench/convert_models.py)", ""]
        lines += [f"- {k}: {v}" for k, v in sorted(failures.items())]
    return "\n".join(lines) + "\n"


def _device() -> str:
    import clgpu_delegate

    dev = clgpu_delegate.select_device("auto")
    return f"{dev.name} ({dev.type}, driver {dev.driver_version})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=str(DEFAULT_DIR))
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--name", default="converted-coverage-pocl")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per model and runtime")
    ap.add_argument("--mem-gb", type=float, default=8, help="address-space limit per model")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # PATH RUNTIME: the worker
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)), flush=True)
        return 0
    folder = Path(args.dir).expanduser()
    models = sorted(folder.glob("*.tflite"))
    if not models:
        ap.error(f"no .tflite in {folder}; make them with bench/convert_models.py")
    rows = []
    for path in models:
        for runtime in [r for r in args.runtimes.split(",") if r]:
            row = {"model": path.name, "runtime": runtime,
                   **_spawn(path, runtime, args.timeout, args.mem_gb)}
            a = row.get("all", {})
            print(f"{path.name} {runtime}: {row['status']} "
                  f"{a.get('delegated', '-')}/{a.get('nodes', '-')} nodes, "
                  f"{a.get('partitions', '-')} partitions, rel err {a.get('rel_err', '-')} "
                  f"{row.get('error', a.get('error', ''))}", flush=True)
            rows.append(row)
    log = folder / "conversion-failures.json"
    failures = json.loads(log.read_text()) if log.exists() else {}
    meta = {
        "device": _device(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "runtimes": args.runtimes,
        "options": 'all: partitioning="all", cpu_warmup=False; default: load() as it is',
        "limits": f"{args.mem_gb:g} GiB address space, {args.timeout:.0f} s per model",
    }
    gap_list, head = gaps(rows), headline(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / args.name
    base.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "headline": head, "gaps": gap_list, "not_converted": failures,
         "rows": rows}, indent=1, default=float) + "\n")
    base.with_suffix(".md").write_text(markdown(meta, rows, gap_list, head, failures))
    print(f"{base}.md: {json.dumps(head)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
