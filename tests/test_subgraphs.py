"""Models with several subgraphs (an init subgraph behind CALL_ONCE, as converters write for
resource variables; control flow): TFLite prepares the delegate on each, and decisions() /
partitions() report every one, the primary subgraph first, not only the last prepared."""

from __future__ import annotations

from parity import check_parity

from clgpu_delegate.modelgen import ModelBuilder


def _model_with_init_subgraph() -> bytes:
    b = ModelBuilder(seed=2)
    x = b.input("x", (1, 8, 8, 4))
    b.call_once(1)
    y = b.conv2d(x, b.rand((6, 3, 3, 4)), b.rand((6,)), activation="RELU")
    b.output(b.avg_pool2d(y, 2, 2))
    init = ModelBuilder(seed=3)
    init.add(init.const(init.rand((4,))), init.const(init.rand((4,))))
    return b.build([init])


def test_every_subgraph_is_reported(runtime: str) -> None:
    r = check_parity(_model_with_init_subgraph(), runtime)
    by_subgraph: dict[int, list[str]] = {}
    for d in r.delegate.decisions():
        by_subgraph.setdefault(d.subgraph, []).append(d.op_name)
    assert sorted(by_subgraph) == [0, 1], by_subgraph
    assert by_subgraph[0] == ["CALL_ONCE", "CONV_2D", "AVERAGE_POOL_2D"], by_subgraph
    assert by_subgraph[1] == ["ADD"], by_subgraph
    main = {d.node: d for d in r.delegate.decisions() if d.subgraph == 0}
    assert main[1].delegated and main[2].delegated and not main[0].delegated
    # The primary subgraph's partition comes first and is named as such.
    assert r.delegate.partition_subgraphs()[0] == 0
    assert r.delegate.partitions()[0] == [1, 2]


def test_a_second_prepare_starts_a_new_report(runtime: str) -> None:
    # Resizing and allocating again makes TFLite prepare the subgraphs again: the report holds
    # each subgraph once.
    import numpy as np

    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load()
    it = make_interpreter(_model_with_init_subgraph(), [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    it.resize_tensor_input(it.get_input_details()[0]["index"], (2, 8, 8, 4))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones((2, 8, 8, 4), np.float32))
    it.invoke()
    subgraphs = [x.subgraph for x in d.decisions()]
    assert subgraphs == [0, 0, 0, 1], subgraphs


def test_a_delegate_reused_by_another_interpreter_reports_that_one(runtime: str) -> None:
    # The same delegate applied to a second interpreter (a different model): its report is the
    # second model's, not the first one's subgraphs with the second appended.
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    b = ModelBuilder(seed=4)
    x = b.input("x", (1, 6, 6, 3))
    b.output(b.relu(b.add(x, 1.0)))
    d = clgpu_delegate.load()
    first = make_interpreter(_model_with_init_subgraph(), [d], runtime=runtime, reference=True)
    first.allocate_tensors()
    assert {x.subgraph for x in d.decisions()} == {0, 1}
    second = make_interpreter(b.build(), [d], runtime=runtime, reference=True)
    second.allocate_tensors()
    assert [(x.subgraph, x.op_name) for x in d.decisions()] == [(0, "ADD"), (0, "RELU")]
