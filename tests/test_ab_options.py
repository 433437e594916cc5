"""bench/ab_options.py's sets: a set's $CLGPU_* knobs (env.VAR) reach every bind of its delegate,
including the one its first invoke does where zero-copy wraps TFLite's tensors (NVIDIA's
default), since the ops read those knobs as they bind; a delegate that binds again while timed
is an error, not a row of times."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from bench_scripts import load_bench
from test_fusion_expand import block


def _block_kernels(t: object) -> int:
    kernels = t.delegate.profile().kernels  # type: ignore[attr-defined]
    return sum(k.algorithm.startswith("inverted_residual") for k in kernels)


def test_a_sets_knob_reaches_the_first_invokes_bind(tmp_path: Path) -> None:
    ab = load_bench("ab_options")
    model = tmp_path / "block.tflite"
    model.write_bytes(block((1, 8, 8, 8), seed=3))
    common = {"partitioning": "all", "profiling": True, "zero_copy": "on"}
    gemm = ab.prepared(str(model), {**common, "env.CLGPU_IR_BLOCK": 0})
    kernel = ab.prepared(str(model), dict(common))
    # The first invoke bound again (zero-copy), inside the set's environment.
    assert gemm.delegate.stats().binds == 2
    binds = gemm.delegate.stats().binds
    feeds = [np.ones(x["shape"], x["dtype"]) for x in gemm.inputs]
    for t in (gemm, kernel):
        t.run(feeds)
    assert gemm.delegate.stats().binds == binds
    assert _block_kernels(gemm) == 0, gemm.delegate.profile().table()
    assert _block_kernels(kernel) == 1, kernel.delegate.profile().table()
    np.testing.assert_allclose(
        gemm.interp.get_tensor(gemm.outputs[0]["index"]),
        kernel.interp.get_tensor(kernel.outputs[0]["index"]),
        rtol=1e-4,
        atol=1e-5,
    )


def test_a_set_bound_again_while_timed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ab = load_bench("ab_options")
    model = tmp_path / "block.tflite"
    model.write_bytes(block((1, 8, 8, 8), seed=4))
    sets = [("a", {"partitioning": "all"}), ("b", {"partitioning": "all"})]
    row = ab.one_model(str(model), sets, 3)
    assert row["a_ms"] > 0 and row["b_ms"] > 0
    # Each set's host time per invoke over its turns: enqueueing, then waiting.
    assert row["a_enqueue_us"] > 0 and row["b_wait_us"] >= 0
    assert row["a_fewer_form"] == 0  # PoCL offers no second launch form
    s0 = SimpleNamespace(
        invokes=10, host_enqueue_us=100.0, host_wait_us=40.0, fewer_launch_invokes=2
    )
    s1 = SimpleNamespace(
        invokes=14, host_enqueue_us=180.0, host_wait_us=60.0, fewer_launch_invokes=5
    )
    assert ab.host_split("a", s0, s1) == {
        "a_enqueue_us": 20.0,
        "a_wait_us": 5.0,
        "a_fewer_form": 0.75,
    }
    assert ab.host_split("a", s0, s0) == {}
    # A timing loop during which a delegate binds again (a stand-in that resizes) is refused.
    calls = {"n": 0}

    def rebinding(candidates, feeds, runs, *args, **kwargs):  # type: ignore[no-untyped-def]
        for t in candidates:
            # A new shape: TFLite moves the tensors, and the delegate plans and binds again.
            t.interp.resize_tensor_input(t.inputs[0]["index"], [2, 8, 8, 8])
            t.interp.allocate_tensors()
            t.run([np.zeros((2, 8, 8, 8), np.float32)])
            calls["n"] += 1

    monkeypatch.setattr(ab, "time_candidates", rebinding)
    with pytest.raises(RuntimeError, match="bound again outside"):
        ab.one_model(str(model), [(n, {**o, "zero_copy": "on"}) for n, o in sets], 3)
    assert calls["n"] == 2


def test_a_run_cut_short_keeps_the_rows_it_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A device visit's time limit kills the run between rows: the files hold every row before.
    ab = load_bench("ab_options")
    models = tmp_path / "models"
    models.mkdir()
    for i in (1, 2):
        (models / f"m{i}.tflite").write_bytes(block((1, 6, 6, 8), seed=i))
    timed = ab.one_model

    def killed_on_the_second(path, sets, runs):  # type: ignore[no-untyped-def]
        if path.endswith("m2.tflite"):
            raise KeyboardInterrupt  # not an Exception: ends the run, as a timeout's signal
        return timed(path, sets, runs)

    monkeypatch.setattr(ab, "one_model", killed_on_the_second)
    argv = ["--set", "real", "--dir", str(models), "--runs", "2", "--tag", "cut"]
    argv += ["--out", str(tmp_path), "--sets", "a:partitioning=all", "b:partitioning=all"]
    with pytest.raises(KeyboardInterrupt):
        ab.main(argv)
    (js,) = tmp_path.glob("ab-options-cut-*.json")
    data = json.loads(js.read_text())
    assert [r["model"] for r in data["rows"]] == ["m1"] and data["rows"][0]["b_ms"] > 0
    assert data["meta"]["complete"] is False
    monkeypatch.setattr(ab, "one_model", timed)
    assert ab.main(argv) == 0
    data = json.loads(js.read_text())
    assert [r["model"] for r in data["rows"]] == ["m1", "m2"] and data["meta"]["complete"] is True
    assert "| m2 |" in js.with_suffix(".md").read_text()
