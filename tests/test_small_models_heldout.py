"""bench/small_models.py --held-out, the models of the small set's kinds with shapes drawn at
random that check the default on shapes nobody tuned it to: a seed names the same models each
time, the draws cover every kind, and what it writes loads and runs on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_bench

from clgpu_delegate.runtime import make_interpreter, random_inputs

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "small_models.py"
pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="not in the checkout")


def _module():  # type: ignore[no-untyped-def]
    return load_bench("small_models")


def _never_slower(tmp_path: Path, tag: str, seeds: str, *extra: str) -> dict:
    """bench/never_slower.py on one dense draw per seed (quick on any device), quickest
    timing; its JSON table."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "never_slower.py"), "--zoo=", "--held-out", "1",
         "--held-out-seeds", seeds, "--runs", "2", "--min-seconds", "0", "--threads", "1",
         *extra, "--tag", tag, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(next(tmp_path.glob(f"never-slower-{tag}-*.json")).read_text())


def test_a_seed_draws_the_same_models_of_every_kind() -> None:
    sm = _module()
    names = list(sm.held_out(40, 3))
    assert names == list(sm.held_out(40, 3))
    assert len(set(names)) == 40
    assert names != list(sm.held_out(40, 4))
    for kind in ("kws", "ds", "dense", "prelu", "audio"):
        assert any(n.startswith(f"ho_{kind}_") for n in names), (kind, names)
    assert any(n.endswith("_int8") for n in names) and not any(
        n.endswith("_int8") for n in names if n.split("_")[1] in ("dense", "prelu", "audio")
    )


def test_image_draws_only_when_asked_and_unknown_kinds_are_refused() -> None:
    sm = _module()
    assert not any("mobilenet" in n for n in sm.held_out(40, 3))
    names = list(sm.held_out(6, 1, ("image",)))
    assert len(names) == 6 and all(n.startswith("ho_mobilenet_v") for n in names), names
    with pytest.raises(ValueError, match="held-out kinds are"):
        sm.held_out(2, 1, ("resnet",))


def test_dynamic_draws_are_the_float_draws_with_int8_weights() -> None:
    """--held-out-dynamic: the same seed's float draws (no int8 ones), named `_dyn`, whose
    weights are int8 and whose activations stay float."""
    import tflite

    sm = _module()
    plain = sm.held_out(12, 9)
    dynamic = sm.held_out(12, 9, dynamic=True)
    assert list(dynamic) == [n + "_dyn" for n in plain if not n.endswith("_int8")]
    model = tflite.Model.GetRootAsModel(next(iter(dynamic.values()))(), 0)
    graph = model.Subgraphs(0)
    types = {graph.Tensors(i).Type() for i in range(graph.TensorsLength())}
    assert tflite.TensorType.INT8 in types and tflite.TensorType.FLOAT32 in types
    assert graph.Tensors(graph.Inputs(0)).Type() == tflite.TensorType.FLOAT32


def test_the_written_models_run_on_the_cpu(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--held-out", "3", "--seed", "11"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    files = sorted(tmp_path.glob("ho_*.tflite"))
    assert len(files) == 3, run.stdout
    for f in files:
        interp = make_interpreter(f.read_bytes(), None, num_threads=1, reference=True)
        interp.allocate_tensors()
        details = interp.get_input_details()
        for d, x in zip(details, random_inputs(details, 0), strict=True):
            interp.set_tensor(d["index"], x)
        interp.invoke()
        out = interp.get_tensor(interp.get_output_details()[0]["index"])
        assert out.size and np.isfinite(out.astype(np.float32)).all(), f.name


def test_never_slower_times_the_drawn_models_of_each_seed(tmp_path: Path) -> None:
    """bench/never_slower.py --held-out N --held-out-seeds A,B adds held_out(N, A) and
    held_out(N, B) to its rows (dense draws: quick to build on any device)."""
    sm = _module()
    expected = list(sm.held_out(1, 5)) + list(sm.held_out(1, 30))
    table = _never_slower(tmp_path, "t", "5,30")
    rows = table["rows"]
    assert [r["model"] for r in rows] == expected
    assert all(r["cpu_ms"] > 0 and r["all_ms"] > 0 for r in rows), rows
    # PoCL offers no one-launch split-K form, so no invoke ran one.
    assert all(r["default_fewer_form"] == r["all_fewer_form"] == 0 for r in rows), rows
    assert table["meta"]["complete"] is True


def test_never_slower_cut_short_keeps_the_rows_it_reached(tmp_path: Path) -> None:
    """A run stopped after its first row (a device visit's time) leaves that row in its
    files, marked incomplete."""
    sm = _module()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "never_slower.py"), "--zoo=", "--held-out", "1",
         "--held-out-seeds", "5,30", "--runs", "2", "--min-seconds", "0", "--threads", "1",
         "--tag", "c", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        first = next(line for line in proc.stdout if line.startswith(tuple(sm.held_out(1, 5))))
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert " cpu " in first, first
    table = json.loads(next(tmp_path.glob("never-slower-c-*.json")).read_text())
    assert table["meta"]["complete"] is False
    assert [r["model"] for r in table["rows"]] == list(sm.held_out(1, 5))
    md = next(tmp_path.glob("never-slower-c-*.md")).read_text()
    assert "cut short" in md and "rows: 1;" in md


def test_never_slower_can_hold_an_interpreter_of_each_model(tmp_path: Path) -> None:
    """--held-interpreter makes an untimed interpreter of each row's model (its buffers first)
    before the candidates: the rows are timed as before and the table says it held one."""
    sm = _module()
    table = _never_slower(tmp_path, "h", "5", "--held-interpreter")
    assert table["meta"]["held_interpreter"] is True
    assert [r["model"] for r in table["rows"]] == list(sm.held_out(1, 5))
    assert all(r["cpu_ms"] > 0 and r["all_ms"] > 0 for r in table["rows"]), table["rows"]


def test_never_slower_per_plan_times_k_interpreters_per_column(tmp_path: Path) -> None:
    """--per-plan 3 makes three interpreters per column (CPU, default, all) in a snake order
    (A: the row's made-first plan) and times all nine: a column is the mean of its instances'
    medians, each kept in the row and shown in brackets; --balanced is --per-plan 2."""
    sm = _module()
    table = _never_slower(tmp_path, "k", "5,30", "--per-plan", "3")
    assert table["meta"]["per_plan"] == 3
    rows = table["rows"]
    assert [r["model"] for r in rows] == list(sm.held_out(1, 5)) + list(sm.held_out(1, 30))
    assert [r["made_first"] for r in rows] == ["default (x3, snake)", "all (x3, snake)"]
    for r in rows:
        for k in ("cpu", "default", "all"):
            each = r[f"{k}_ms_each"]
            assert len(each) == 3 and all(x > 0 for x in each), r
            assert r[f"{k}_ms"] == pytest.approx(sum(each) / 3), r
        for k in ("default", "all"):
            assert len(r[f"{k}_nodes_each"]) == 3, r
        assert r["ratio"] == pytest.approx(r["default_ms"] / min(r["cpu_ms"], r["all_ms"]))
    md = next(tmp_path.glob("never-slower-k-*.md")).read_text()
    assert "3 interpreters per column" in md
    first = rows[0]["cpu_ms_each"]
    assert f"({first[0]:.3f}, {first[1]:.3f}, {first[2]:.3f})" in md
    two = _never_slower(tmp_path, "b", "5", "--balanced")
    assert two["meta"]["per_plan"] == 2
    assert all(len(r["cpu_ms_each"]) == 2 for r in two["rows"]), two["rows"]


def test_the_ds_width_sweep_builds_float_ds_cnns_of_the_named_widths() -> None:
    """--ds-widths: 28 float DS-CNNs, named by their spectrogram, width and blocks, whose
    convolutions have the width the name says (the split-K GEMM starts at 32 channels)."""
    import tflite

    made = _module().ds_widths()
    assert len(made) == 28 and all(n.startswith("dsw_f") for n in made), list(made)
    for name in ("dsw_f49_b10_w16_n4", "dsw_f98_b40_w128_n6"):
        graph = tflite.Model.GetRootAsModel(made[name](), 0).Subgraphs(0)
        out = graph.Tensors(graph.Operators(0).Outputs(0)).ShapeAsNumpy().tolist()
        assert out[-1] == int(name.split("_w")[1].split("_")[0]), (name, out)
        assert out[1] == (int(name.split("_f")[1].split("_")[0]) + 1) // 2, (name, out)
