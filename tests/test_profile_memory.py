"""Profiles (every delegated node has records, a valid Chrome trace with one event per
kernel), the memory planner (allocated vs lower bound, fp16 halves it), work split around
a lowered max allocation, and the binary cache's warm start."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from parity import check_parity, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder, zoo
from clgpu_delegate.runtime import make_interpreter


def _delegated(model: bytes, runtime: str, invokes: int = 1, **options):
    d = clgpu_delegate.load(partitioning="all", **options)
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    inputs = random_inputs(it.get_input_details(), 0)
    for _ in range(invokes):
        out = run(it, inputs)
    return d, it, out


def test_profile_covers_every_delegated_node_and_traces_each_kernel(
    runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every depthwise folds, as the comments below assume: on this 2-core device the later
    # layers' would not pay (DepthwiseFoldPays), which tests/test_fusion_depthwise.py checks.
    monkeypatch.setenv("CLGPU_TRIAL_DW_FOLD_ALWAYS", "1")
    d, _, _ = _delegated(zoo.build("mobilenet_v2"), runtime, invokes=3, profiling=True)
    prof = d.profile()
    # Every residual ADD of MobileNetV2 is folded into its projection conv (option fuse_add):
    # it runs no kernel of its own, and the conv's records say "+ADD".
    # Its RESHAPE between two activations shares their memory and runs nothing either, and each
    # depthwise convolution runs inside the GEMM of the 1x1 conv after it ("+DEPTHWISE").
    folded = {x.node for x in d.decisions() if x.op_name in ("ADD", "RESHAPE", "DEPTHWISE_CONV_2D")}
    compute = {x.node for x in d.decisions() if x.delegated and x.op_name != "DEQUANTIZE"} - folded
    # The classifier's RESHAPE keeps its output in its input's storage: no command either.
    reshapes = {x.node for x in d.decisions() if x.op_name == "RESHAPE"}
    compute -= reshapes
    assert set(prof.nodes()) == compute
    adds = {x.node for x in d.decisions() if x.op_name == "ADD"}
    assert len({k.node for k in prof.kernels if k.algorithm.endswith("+ADD")}) == len(adds)
    depthwise = {x.node for x in d.decisions() if x.op_name == "DEPTHWISE_CONV_2D"}
    assert len({k.node for k in prof.kernels if "+DEPTHWISE" in k.algorithm}) == len(depthwise)
    assert all(k.count == 3 and 0 <= k.total_ms <= k.raw_ms and k.raw_ms > 0 for k in prof.kernels)
    assert all(
        k.flops > 0 for k in prof.kernels if k.op == "CONV_2D" and k.kernel != "gemm_splitk_reduce"
    )
    assert prof.invokes() == 3 and "CONV_2D" in prof.table()
    trace = json.loads(prof.to_chrome_trace(tmp_path / "t.json").read_text())
    kernel_events = [e for e in trace["traceEvents"] if e["cat"] != "transfer"]
    launches = sum(p.kernels_per_invoke for p in prof.partitions)
    assert len(kernel_events) == 3 * launches
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace["traceEvents"])
    assert {e["args"]["node"] for e in kernel_events} == compute
    # The wall time's parts: the host enqueues before the invoke returns, the device span
    # holds every timed command and fits in the host's wall time (same invokes).
    for p in prof.partitions:
        assert 0 < p.enqueue_ms <= p.wall_ms
        busy = p.upload_ms + p.compute_raw_ms + p.download_ms
        assert p.compute_ms <= p.compute_raw_ms
        assert busy * 0.999 <= p.span_ms <= p.wall_ms * 1.01
        assert p.device_idle_ms == pytest.approx(p.span_ms - busy, abs=1e-6)
    assert "idle ms" in prof.table()


def test_profile_takes_the_event_overhead_off_each_kernel(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The overhead is normally measured once per device (runtime/profiler.h); here it is
    # set, so the arithmetic can be checked against the events' own times.
    monkeypatch.setenv("CLGPU_EVENT_OVERHEAD_US", "2.5")
    d, _, _ = _delegated(zoo.build("mobilenet_v2"), runtime, invokes=2, profiling=True)
    prof = d.profile()
    assert prof.event_overhead_us == pytest.approx(2.5)
    for k in prof.kernels:
        # Each launch loses 2.5 us, but never below 0.
        assert max(k.raw_ms - k.count * 2.5e-3, 0.0) - 1e-9 <= k.total_ms <= k.raw_ms
    launches = sum(p.kernels_per_invoke for p in prof.partitions) * prof.invokes()
    taken = sum(k.raw_ms - k.total_ms for k in prof.kernels)
    assert 0 < taken <= launches * 2.5e-3 + 1e-9
    assert prof.kernel_ms_per_invoke() == pytest.approx(
        prof.kernel_ms_per_invoke(raw=True) - taken / 2
    )
    for p in prof.partitions:
        assert p.compute_raw_ms - p.compute_ms == pytest.approx(taken)
    # Rates come from the events' own times (a lower bound, never inflated by the subtraction).
    conv = next(k for k in prof.kernels if k.flops > 0)
    assert conv.gflops == pytest.approx(conv.flops / (conv.raw_ms / conv.count * 1e6))
    assert prof.to_dict()["event_overhead_us"] == pytest.approx(2.5)
    assert "less 2.50 us per kernel" in prof.table()


def test_profile_event_overhead_setting_must_be_a_number(
    runtime: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLGPU_EVENT_OVERHEAD_US", "fast")
    d, _, _ = _delegated(zoo.build("lenet5"), runtime, profiling=True)
    assert "CLGPU_EVENT_OVERHEAD_US=fast is not a number" in capfd.readouterr().err
    prof = d.profile()
    # Measured instead: what PoCL's events add is within noise of nothing, never negative.
    assert prof.event_overhead_us >= 0
    assert all(0 <= k.total_ms <= k.raw_ms for k in prof.kernels)


@pytest.mark.parametrize("arena", ["", "svm"])
@pytest.mark.parametrize("name,opts", [("mobilenet_v2", {}), ("pynet", {"size": 64})])
def test_planner_near_lower_bound_and_fp16_halves(
    name: str, opts: dict, arena: str, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arena "": the device's default; "svm": NVIDIA's path (SVM views) on any device.
    if arena:
        monkeypatch.setenv("CLGPU_ARENA", arena)
    model = zoo.build(name, **opts)
    mem = {}
    for precision in ("fp32", "fp16"):
        d, interp, _ = _delegated(model, runtime, precision=precision, zero_copy="off")
        mem[precision] = d.memory()  # while the interpreter (and its partitions) lives
        m = mem[precision]
        # One arena with tensors at offsets reaches the lower bound; where sub-buffers are
        # avoided (NVIDIA's driver, see runtime/partition.cc) tensors share whole buffers,
        # which on MobileNetV2 cannot go below 7/6 of it (tests/test_memory_planner.py).
        if arena:
            assert all(p.arena == arena for p in m.partitions), m
        one_arena = all(p.buffers == 1 for p in m.partitions)
        assert m.allocated_bytes <= (1.15 if one_arena else 1.17) * m.lower_bound_bytes, m
        assert m.lower_bound_bytes < m.naive_bytes, m
    assert mem["fp16"].allocated_bytes <= 0.55 * mem["fp32"].allocated_bytes, mem
    # Weights shrink less: F(4x4) Winograd keeps its transformed filters in float (precision).
    assert mem["fp16"].weight_bytes < mem["fp32"].weight_bytes, mem


@pytest.mark.parametrize("algorithm", ["winograd", "winograd4"])
def test_winograd_splits_rows_under_a_small_max_allocation(algorithm: str, runtime: str) -> None:
    b = ModelBuilder(seed=4)
    x = b.input("x", (2, 23, 19, 24))
    b.output(b.conv2d(x, b.rand((20, 3, 3, 24)), bias=b.rand((20,)), activation="RELU"))
    model = b.build()
    whole, whole_interp, _ = _delegated(model, runtime, conv_algorithm=algorithm, profiling=True)
    split, split_interp, _ = _delegated(
        model, runtime, conv_algorithm=algorithm, profiling=True, max_alloc_bytes=96 * 1024
    )
    # Three kernels per pass: more passes when the transformed tiles must stay small.
    assert (
        split.profile().partitions[0].kernels_per_invoke
        > whole.profile().partitions[0].kernels_per_invoke
    )
    scratch = split.memory().partitions[0].scratch_bytes
    assert 0 < scratch <= 2 * 96 * 1024, scratch
    check_parity(
        model, runtime, expect_delegated="all", conv_algorithm=algorithm, max_alloc_bytes=96 * 1024
    )


def test_zero_copy_gives_identical_results(runtime: str) -> None:
    model = zoo.build("mobilenet_v2")
    outs = [_delegated(model, runtime, zero_copy=z)[2][0] for z in ("off", "on")]
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_zero_copy_reports_the_boundary_tensors_it_uses_in_place(
    runtime: str, precision: str
) -> None:
    # A partition between two CPU ops: its input and output are TFLite tensors that
    # zero-copy wraps instead of copying; memory() reports them apart from activations.
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 12, 10, 8))
    y = b.tanh(x)
    y = b.conv2d(y, b.rand((6, 3, 3, 8)), bias=b.rand((6,)))
    y = b.conv2d(y, b.rand((5, 1, 1, 6)), bias=b.rand((5,)))
    b.output(b.tanh(y))
    model = b.build()
    boundary = 4 * (12 * 10 * 8 + 12 * 10 * 5)
    mem = {}
    for z in ("off", "on"):
        d, _, out = _delegated(model, runtime, zero_copy=z, precision=precision)
        mem[z] = d.memory()
        ref = make_interpreter(model, runtime=runtime, reference=True)
        ref.allocate_tensors()
        np.testing.assert_allclose(
            out[0], run(ref, random_inputs(ref.get_input_details(), 0))[0], rtol=0, atol=2e-2
        )
    assert mem["off"].host_wrapped_bytes == 0, mem
    assert mem["on"].host_wrapped_bytes == boundary, mem
    # fp32 activations in place take the boundary tensors out of the device plan.
    if precision == "fp32":
        assert mem["on"].naive_bytes < mem["off"].naive_bytes, mem


def test_warm_cache_builds_nothing(run_python, tmp_path: Path) -> None:
    code = (
        "import clgpu_delegate\n"
        "from clgpu_delegate.modelgen import zoo\n"
        "from clgpu_delegate.runtime import make_interpreter\n"
        f"d = clgpu_delegate.load(partitioning='all', serialization_dir={str(tmp_path / 'c')!r},"
        " model_token='mnv2')\n"
        "it = make_interpreter(zoo.build('mobilenet_v2'), [d], reference=True)\n"
        "it.allocate_tensors(); it.invoke()\n"
        "s = d.stats(); print(s.programs_built, s.disk_cache_hits, s.disk_cache_stored)\n"
    )
    env = {"POCL_KERNEL_CACHE": "0"}
    cold = run_python(code, env=env)
    warm = run_python(code, env=env)
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    built, hits, stored = map(int, cold.stdout.split())
    assert built > 0 and stored == built and hits == 0, cold.stdout
    built, hits, stored = map(int, warm.stdout.split())
    assert built == 0 and hits > 0 and stored == 0, warm.stdout
