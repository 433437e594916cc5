"""bench/fit_cpu_handoff.py, which fits the CPU side's hand-off per node by kind
(delegate/cpu_costs.cc): on never-slower rows whose CPU times were made of known hand-offs it must
find them, count the nodes of each kind as the delegate's handlers do, and weigh only the rows
whose estimate is of the whole model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from clgpu_delegate.modelgen._layers import start
from clgpu_delegate.modelgen._ptq import quantize_model

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "fit_cpu_handoff.py"
pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="not in the checkout")
TRUE = np.array([8.0, 6.0, 4.0, 2.0])  # float conv, int8 conv, FULLY_CONNECTED, other (us)


def _model(convs: int, adds: int, fcs: int, int8: bool) -> bytes:
    net, x = start(4, 8, seed=convs + 3 * adds, fp16_weights=False)
    for _ in range(convs):
        x = net.conv(x, 8, 1, act=None)
    for _ in range(adds):
        x = net.b.add(x, net.b.rand((1, 1, 8)))
    x = net.b.reshape(x, (1, 128))
    for _ in range(fcs):
        x = net.fc(x, 128)
    model = net.finish(x, softmax=False)
    return quantize_model(model, samples=2) if int8 else model


@pytest.fixture(scope="module")
def fit_module():  # noqa: ANN201
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import fit_cpu_handoff
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return fit_cpu_handoff


def test_the_fit_finds_the_handoffs_the_times_were_made_of(tmp_path: Path, fit_module) -> None:  # noqa: ANN001
    shapes = [(6, 1, 1, False), (2, 8, 1, False), (1, 2, 6, False), (5, 5, 0, False)]
    shapes += [(6, 1, 1, True), (2, 6, 2, True)]
    rows = []
    for i, shape in enumerate(shapes):
        data = _model(*shape)
        (tmp_path / f"m{i}.tflite").write_bytes(data)
        kinds = fit_module.node_kinds(data)
        counts = np.array([kinds[k] for k in fit_module.KINDS], dtype=float)
        assert counts[1] == (shape[0] if shape[3] else 0), kinds
        rest_us = 10.0 + 3 * i  # the arithmetic and traffic, which both sides share
        rows.append(
            {
                "model": f"m{i}",
                "cpu_ms": (rest_us + counts @ TRUE) / 1e3,
                "all_ms": 1.0,
                "est_device_ms": 1.0,
                "est_cpu_ms": (rest_us + 4.7 * counts.sum()) / 1e3,  # one figure for every node
                "all_partitions": 1,
                "all_nodes": int(counts.sum()),
            }
        )
    # Left out: two partitions, a part of the model, a model of no --dir.
    rows += [
        {**rows[0], "all_partitions": 2},
        {**rows[1], "all_nodes": 3, "cpu_ms": 9.0},
        {**rows[2], "model": "elsewhere", "cpu_ms": 9.0},
    ]
    table = tmp_path / "ns.json"
    table.write_text(json.dumps({"meta": {"device": "X", "driver": "1"}, "rows": rows}))
    argv = ["--measured", str(table), "--dir", str(tmp_path), "--out", str(tmp_path)]
    assert fit_module.main(argv) == 0
    result = json.loads((tmp_path / "cpu-handoff-X.json").read_text())
    meta = result["meta"]
    assert [meta["handoff_us"][k] for k in fit_module.KINDS] == pytest.approx(list(TRUE))
    assert meta["rows"] == len(shapes)
    assert meta["median_abs_log_after"] == pytest.approx(0, abs=1e-3)
    assert meta["median_abs_log_before"] > 0.05
    # --handoff weighs the given figures instead of fitting them.
    assert fit_module.main([*argv, "--handoff", "4.7,4.7,4.7,4.7", "--tag", "same"]) == 0
    same = json.loads((tmp_path / "cpu-handoff-same-X.json").read_text())["meta"]
    assert not same["fitted"]
    assert same["median_abs_log_after"] == same["median_abs_log_before"]


def _convs(convs: int, size: int, int8: bool) -> bytes:
    net, x = start(size, 8, seed=convs + size, fp16_weights=False)
    for _ in range(convs):
        x = net.conv(x, 8, 1, act=None)
    model = net.finish(x, softmax=False)
    return quantize_model(model, samples=2) if int8 else model


def test_the_fit_finds_the_small_convolutions_ramp(tmp_path: Path, fit_module) -> None:  # noqa: ANN001
    """CPU times made with a convolution's hand-off rising from 2 us at no output to its kind's
    figure at 2,000 output elements (delegate/cpu_costs.cc): --fit-small-conv finds that ramp
    from maps of 4 x 4, 8 x 8 and 16 x 16 x 8, and --small-conv weighs it exactly."""
    rows = []
    for i, (convs, size, int8) in enumerate(
        [(6, 4, False), (3, 8, False), (5, 16, False), (4, 4, True), (6, 8, True), (2, 16, True)]
    ):
        data = _convs(convs, size, int8)
        (tmp_path / f"r{i}.tflite").write_bytes(data)
        kinds = fit_module.node_kinds(data)
        counts = np.array([kinds[k] for k in fit_module.KINDS], dtype=float)
        sizes = fit_module.conv_outputs(data)["int8_conv" if int8 else "float_conv"]
        assert sizes == [float(size * size * 8)] * convs
        full = TRUE[1] if int8 else TRUE[0]
        ramp = sum(2.0 + (full - 2.0) * min(1.0, e / 2000.0) for e in sizes)
        rest_us = 10.0 + 3 * i
        other = counts @ TRUE - counts[:2] @ TRUE[:2]
        rows.append(
            {
                "model": f"r{i}",
                "cpu_ms": (rest_us + ramp + other) / 1e3,
                "all_ms": 1.0,
                "est_device_ms": 1.0,
                "est_cpu_ms": (rest_us + counts @ TRUE) / 1e3,  # the kinds' figures, no ramp
                "all_partitions": 1,
                "all_nodes": int(counts.sum()),
            }
        )
    table = tmp_path / "ns.json"
    table.write_text(json.dumps({"meta": {"device": "X", "driver": "1"}, "rows": rows}))
    argv = ["--measured", str(table), "--dir", str(tmp_path), "--out", str(tmp_path),
            "--table-handoff", "8,6,4,2", "--handoff", "8,6,4,2"]
    assert fit_module.main([*argv, "--fit-small-conv", "--tag", "fit"]) == 0
    meta = json.loads((tmp_path / "cpu-handoff-fit-X.json").read_text())["meta"]
    assert meta["small_conv"] == [2.0, 2000.0]
    assert meta["median_abs_log_after"] == pytest.approx(0, abs=1e-3)
    assert meta["median_abs_log_before"] > 0.05
    assert fit_module.main([*argv, "--small-conv", "2,2000", "--tag", "weigh"]) == 0
    weighed = json.loads((tmp_path / "cpu-handoff-weigh-X.json").read_text())["meta"]
    assert not weighed["fitted"]
    assert weighed["median_abs_log_after"] == pytest.approx(0, abs=1e-3)
