"""Can an invoke's kernel launches be enqueued ahead of the invoke (behind a user event the
invoke sets), or by several host threads at once, for less host time than enqueueing them in
the invoke? Builds bench/gate_probe.c with the system C compiler against the OpenCL ICD loader
and runs it: no delegate, no model (see the C file for the cases).

    python bench/gate_probe.py [--reps 50] [--tag T] [--out bench/results]

Writes gate-probe[-TAG]-<device>.json and .md (device, driver, date, command).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def build(tmp: Path) -> Path:
    exe = tmp / "gate_probe"
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-std=c11", "-o", str(exe), str(HERE / "gate_probe.c"),
           "-l:libOpenCL.so.1", "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: building the probe failed: {done.stderr.strip()[:400]}")
    return exe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50, help="invokes per case")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        done = subprocess.run([str(exe), str(a.reps)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: the probe failed: {done.stderr.strip()[:400]}")
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    head, rows = lines[0], lines[1:]
    meta = {
        "device": head["device"],
        "driver": head["driver"],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python "
        + " ".join(shlex.quote(x) for x in [sys.argv[0], *(argv or sys.argv[1:])]),
        "reps": a.reps,
    }
    stem = "gate-probe" + (f"-{a.tag}" if a.tag else "")
    base = a.out / f"{stem}-{head['device'].replace(' ', '_')}"
    a.out.mkdir(parents=True, exist_ok=True)
    Path(f"{base}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    md = [f"# {stem} on {meta['device']}", ""] + [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", "| case | launches | what | us | us per launch |", "|---|---|---|---|---|"]
    md += [
        f"| {r['case']} | {r['launches']} | {r['what']} | {r['us']:.1f} "
        f"| {r['us_per_launch']:.2f} |"
        for r in rows
    ]
    Path(f"{base}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
