"""bench/fit_launch_costs.py, which fits the device profile's launch costs by kind
(cl/device_profile.h `launch_us`): on never-slower rows made from known costs it must find
those costs, and leave out the rows it is documented to leave out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "fit_launch_costs.py"
pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="not in the checkout")

COSTS = (8.5, 10.0, 4.5, 6.0)  # gemm, fused, split, small (us)
KINDS = ("gemm", "fused", "split", "small")


def _row(model: str, counts: np.ndarray, rest_ms: float, **over: object) -> dict:
    launches_ms = float(np.dot(counts, COSTS)) / 1e3
    row = {
        "model": model,
        "cpu_ms": launches_ms + rest_ms,  # within the band
        "all_ms": launches_ms + rest_ms,
        "default_ms": launches_ms + rest_ms,
        "all_partitions": 1,
        "all_nodes": 50,
        "model_nodes": 50,
        # As the estimate reports them: one calibrated cost of 7 us, a gap of 1 after each.
        "est_kernels": int(counts.sum()),
        "est_device_ms": rest_ms + int(counts.sum()) * (7 + 1) / 1e3,
        "est_floors_ms": int(counts.sum()) * 7 / 1e3,
        "est_arith_ms": 0.001,
        "est_gap_us": 1.0,
        "est_us_per_kernel": 8.0,
        "est_cpu_ms": launches_ms + rest_ms,
    }
    row.update({f"est_{k}": int(n) for k, n in zip(KINDS, counts, strict=True)})
    row.update(over)
    return row


def test_the_fit_finds_the_costs_the_times_were_made_of(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [_row(f"m{i}", rng.integers(0, 40, 4), 0.03 + 0.01 * i) for i in range(14)]
    # Left out: two partitions, a part of the model, `all` 4x the CPU, arithmetic-bound.
    rows += [
        _row("two_parts", np.array([5, 5, 5, 5]), 0.05, all_partitions=2, all_ms=9.0),
        _row("part", np.array([5, 5, 5, 5]), 0.05, all_nodes=20, all_ms=9.0),
        _row("far", np.array([5, 5, 5, 5]), 0.05, cpu_ms=0.01),
        _row("compute", np.array([5, 5, 5, 5]), 0.05, est_arith_ms=1.0, all_ms=9.0),
    ]
    table = tmp_path / "ns.json"
    table.write_text(json.dumps({"meta": {"device": "X", "driver": "1"}, "rows": rows}))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--measured", str(table), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=SCRIPT.parent,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "launch-costs-X.json").read_text())
    fitted = json.loads(result["meta"]["fitted_us"])
    assert [fitted[k] for k in KINDS] == pytest.approx(COSTS, abs=0.01)
    assert result["meta"]["rows"] == 14
    assert {r["model"] for r in result["rows"]} == {f"m{i}" for i in range(14)}
    assert result["meta"]["rms_log_fitted"] == pytest.approx(0, abs=1e-3)
