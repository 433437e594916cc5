"""Cost-aware partitioning: the default leaves on the CPU what would not win. On a CPU
OpenCL device (PoCL) that is everything; `inspect` shows the decision and its numbers."""

from __future__ import annotations

import numpy as np
import pytest
from parity import random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.report import format_report, inspect_model
from clgpu_delegate.runtime import make_interpreter


def test_cost_declines_on_a_cpu_device_and_output_is_unchanged(runtime: str) -> None:
    delegate = clgpu_delegate.load(partitioning="cost")
    if delegate.device.type == "gpu":
        pytest.skip("this checks the CPU-device rule; a GPU may rightly claim the model")
    model = zoo.build("mobilenet_v2")
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    assert delegate.delegated_nodes() == []
    reasons = {d.reason for d in delegate.decisions() if d.op_name == "CONV_2D"}
    assert reasons and all(r.startswith("cost:") for r in reasons), reasons
    ref = make_interpreter(model, runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), 0)
    np.testing.assert_array_equal(run(interp, inputs)[0], run(ref, inputs)[0])


def test_all_claims_what_cost_declines(runtime: str) -> None:
    model = zoo.build("lenet5")
    claimed = clgpu_delegate.load(partitioning="all")
    make_interpreter(model, [claimed], runtime=runtime, reference=True)
    assert claimed.delegated_nodes(), claimed.decisions()


def test_default_is_cost_without_the_test_override(run_python) -> None:
    out = run_python(
        "import clgpu_delegate\n"
        "from clgpu_delegate.modelgen import zoo\n"
        "from clgpu_delegate.runtime import make_interpreter\n"
        "d = clgpu_delegate.load()\n"
        "make_interpreter(zoo.build('lenet5'), [d], reference=True)\n"
        "print(d.device.type, len(d.delegated_nodes()),"
        " sum(r.reason.startswith('cost:') for r in d.decisions()))\n",
        env={"CLGPU_PARTITIONING": None},
    )
    assert out.returncode == 0, out.stderr
    dev_type, delegated, cost_reasons = out.stdout.split()
    if dev_type == "cpu":
        assert int(delegated) == 0 and int(cost_reasons) > 0, out.stdout


def test_inspect_shows_cost_decisions() -> None:
    report = inspect_model(zoo.build("lenet5"), partitioning="cost")
    text = format_report(report)
    if report.partitions:
        pytest.skip("the device claims lenet5; nothing declined to show")
    assert "cost:" in text and ("MFLOP" in text or "CPU itself" in text), text
