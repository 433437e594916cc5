"""Hostile models, round 3: a tensor a node writes that the model also gives data (TFLite's CPU
ignores that data; the delegate once read it as a weight, and TFLite's partitioner takes such a
tensor for a constant, so the delegate leaves the model to the CPU), and operands whose rank
TFLite's CPU kernels refuse at prepare (the delegate must not run what the CPU refuses)."""

from __future__ import annotations

import numpy as np
import pytest
from parity import FP32_RTOL, compare, random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import make_interpreter


def _written_with_data(extra: int = 0, reshape: bool = False) -> bytes:
    """conv -> y (y also given data, `extra` values more than its shape holds) -> ADD(y, x2)
    and a conv reading the sum; with `reshape`, a RESHAPE reads y first (tflite_runtime 2.14's
    partitioner took y for a constant the RESHAPE could read before the conv wrote it)."""
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 6, 6, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), padding="SAME")
    b._check(y).data = np.full(6 * 6 * 4 + extra, 1000.0, np.float32)  # the planted data
    if reshape:
        y = b.reshape(y, (1, 6, 24))
        z = b.add(y, b.rand((1, 6, 24)))
        z = b.reshape(z, (1, 6, 6, 4))
    else:
        z = b.add(y, b.rand((1, 6, 6, 4)))
    b.output(b.conv2d(z, b.rand((2, 1, 1, 4)), b.rand((2,))))
    return b.build()


@pytest.mark.parametrize("reshape", [False, True])
def test_written_tensor_with_data_leaves_the_model_to_the_cpu(
    runtime: str, reshape: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    model = _written_with_data(reshape=reshape)
    # A copy each: the CPU's conv writes into the model's bytes, and a RESHAPE of what it takes
    # for a constant reads them at prepare.
    ref = make_interpreter(bytearray(model), runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details())
    want = run(ref, inputs)
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(bytearray(model), [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    compare(run(it, inputs), want, FP32_RTOL, None, runtime)
    assert not d.delegated_nodes()
    reasons = {x["reason"] for x in d.decisions()}
    assert len(reasons) == 1 and "also holds 576 bytes of data" in reasons.pop(), d.decisions()
    assert capfd.readouterr().err.count("claims nothing in this model") == 1


def test_written_tensor_with_more_data_than_its_shape(runtime: str) -> None:
    """ai_edge_litert loads it and its conv refuses to resize the tensor; tflite_runtime 2.14
    refuses the model when it loads it. The delegate ran it (its node's prepare never ran) and
    crashed LiteRT's AllocateTensors when another node failed."""
    model = _written_with_data(extra=4)
    try:
        make_interpreter(model, runtime=runtime, reference=True).allocate_tensors()
    except (RuntimeError, ValueError) as e:
        cpu_error = str(e)
    else:
        pytest.fail("the CPU ran it")
    d = clgpu_delegate.load(partitioning="all")
    with pytest.raises((RuntimeError, ValueError)) as got:
        make_interpreter(model, [d], runtime=runtime, reference=True).allocate_tensors()
    assert str(got.value).split("Node")[0] == cpu_error.split("Node")[0]
    assert not d.delegated_nodes()


REFUSED_RANKS = {  # operand -> (a model with it, input index): TFLite's kernels want rank 1
    "depthwise_bias": 2,
    "split_v_sizes": 1,
    "transpose_perm": 1,
    "transpose_conv_output_shape": 0,
    "slice_begin": 1,
    "slice_size": 2,
    "strided_slice_begin": 1,
    "strided_slice_end": 2,
    "strided_slice_strides": 3,
}


def _refused_by_the_cpu(kind: str) -> bytes:
    """An operand of rank 2 where TFLite's kernel takes rank 1: a DEPTHWISE_CONV_2D bias, a
    SPLIT_V size_splits of shape [2, 1], a TRANSPOSE perm, a TRANSPOSE_CONV output_shape, a SLICE
    or STRIDED_SLICE begin, size, end or strides (CONV_2D's CPU kernel checks only its bias'
    element count)."""
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 6, 6, 4))
    op = kind.rsplit("_", 1)[0]
    if op == "split_v":
        a, c = b.split_v(x, [1, 3], axis=3)
        b.output(a)
        b.output(c)
    elif op == "transpose":
        b.output(b.transpose(x, (0, 2, 1, 3)))
    elif op == "transpose_conv_output":
        b.output(b.transpose_conv(x, b.rand((3, 3, 3, 4)), (12, 12), bias=b.rand((3,))))
    elif op == "slice":
        b.output(b.slice(x, (0, 1, 0, 1), (1, 3, 4, 2)))
    elif op == "strided_slice":
        b.output(b.strided_slice(x, (0, 1, 0, 0), (1, 6, 6, 4), (1, 2, 3, 1)))
    else:
        b.output(b.depthwise_conv2d(x, b.rand((1, 3, 3, 4), scale=0.5), b.rand((4,))))
    t = b._check(b._ops[-1].inputs[REFUSED_RANKS[kind]])
    t.shape = (t.shape[0], 1)
    t.data = t.data.reshape(t.shape)
    return b.build()


@pytest.mark.parametrize("kind", list(REFUSED_RANKS))
def test_what_the_cpu_refuses_does_not_run(kind: str, runtime: str) -> None:
    model = _refused_by_the_cpu(kind)
    with pytest.raises((RuntimeError, ValueError)):
        make_interpreter(model, runtime=runtime, reference=True).allocate_tensors()
    d = clgpu_delegate.load(partitioning="all")
    with pytest.raises((RuntimeError, ValueError)):
        make_interpreter(model, [d], runtime=runtime, reference=True).allocate_tensors()
    assert not d.delegated_nodes()


def test_cpu_kernel_that_may_overrun_keeps_the_model_on_the_cpu(runtime: str, capfd) -> None:
    """A CONV_2D of stride 65537 (TFLite 2.14's kernel writes past its arena): the delegate
    claims nothing, so TFLite's arena is what the CPU alone has, and says why once."""
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 5, 5, 3))
    y = b.add(x, b.rand((1, 5, 5, 3)))
    y = b.conv2d(y, b.rand((4, 1, 1, 3)), b.rand((4,)), stride=65537, padding="VALID")
    b.output(b.add(y, b.rand((4,))))
    model = b.build()
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    ref = make_interpreter(model, runtime=runtime, reference=True)
    try:
        ref.allocate_tensors()
    except RuntimeError as e:  # LiteRT checks the stride against INT16_MAX itself
        assert "stride" in str(e)
        with pytest.raises(RuntimeError, match="stride"):
            it.allocate_tensors()
        assert not d.delegated_nodes()
        return
    inputs = random_inputs(ref.get_input_details())
    want = run(ref, inputs)
    it.allocate_tensors()
    got = run(it, inputs)
    assert not d.delegated_nodes()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert capfd.readouterr().err.count("claims nothing in this model") == 1


def test_absent_transpose_conv_input_is_not_read(runtime: str) -> None:
    """A TRANSPOSE_CONV whose data input is -1 (found by the fuzzer): the delegate read that
    tensor's shape from before TFLite's tensor array and crashed one run in three."""
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 4, 5, 3))
    y = b.transpose_conv(x, b.rand((4, 3, 3, 3)), (8, 10), bias=b.rand((4,)))
    b.output(b.conv2d(y, b.rand((2, 3, 3, 4)), b.rand((2,))))
    b._ops[0].inputs[2] = -1
    model = b.build()
    for _ in range(3):
        d = clgpu_delegate.load(partitioning="all")
        with pytest.raises((RuntimeError, ValueError)):
            make_interpreter(model, [d], runtime=runtime, reference=True).allocate_tensors()
        why = {x["op_name"]: x["reason"] for x in d.decisions()}
        assert why["TRANSPOSE_CONV"] == "TRANSPOSE_CONV input is absent", why


def test_expand_dims_gives_its_output_its_input_type(runtime: str) -> None:
    """An EXPAND_DIMS of an int32 tensor whose output the model declares float32 (found by the
    fuzzer): TFLite's kernel makes the output int32 at prepare, so the float ops reading it stay
    on the CPU too (the delegate claimed them and its partition failed to prepare)."""
    b = ModelBuilder(seed=10)
    x = b.input("x", (2, 3))
    y = b.expand_dims(b.add(x, b.rand((3,))), 0)
    b.output(b.log_softmax(b.squeeze(y, (0,))))
    b._ops[1].inputs[0] = b.const(np.arange(6, dtype=np.int32).reshape(2, 3))  # int32 data
    model = b.build()
    ref = make_interpreter(bytearray(model), runtime=runtime, reference=True)
    ref.allocate_tensors()
    inputs = random_inputs(ref.get_input_details())
    want = run(ref, inputs)
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(bytearray(model), [d], runtime=runtime, reference=True)
    it.allocate_tensors()
    got = run(it, inputs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    why = {x["op_name"]: x["reason"] for x in d.decisions()}
    # The SQUEEZE reads int32 values, and its output is declared float32.
    assert "int32 values to another type" in why["SQUEEZE"], why


# begin, the size the model is built with, the RESHAPE after it, the delegate's reason once the
# size becomes [1, 6, 8, 4].
SLICE_CASES = {
    "past_its_input": ((0, 1, 0, 1), (1, 2, 2, 3), (2, 6), "SLICE past its input"),
    "larger_than_its_output": (
        (0, 0, 0, 0),
        (1, 1, 8, 4),
        (8, 4),
        "into its declared output [1,1,8,4]",
    ),
}


@pytest.mark.parametrize("case", sorted(SLICE_CASES))
def test_hostile_slice_keeps_the_model_on_the_cpu(runtime: str, case: str) -> None:
    """A SLICE whose constant size [1, 6, 8, 4] leaves its input, or is its whole input where the
    model declares a smaller output (both found by the fuzzer; the second a mutant that made a
    STRIDED_SLICE's end the SLICE's size): tflite_runtime 2.14's kernel keeps the declared output
    shape and copies the box unchecked, past its buffers; with part of the model delegated the
    smaller arena made that a heap corruption (malloc abort) where the CPU alone got through.
    LiteRT's kernel refuses the first and sizes its output to the box in the second. The
    delegate claims nothing. (Not invoked: the CPU's own kernel writes out of bounds.)"""
    begin, size, shape, reason = SLICE_CASES[case]
    b = ModelBuilder(seed=11)
    x = b.input("x", (1, 6, 8, 4))
    y = b.slice(b.add(x, b.rand((4,))), begin, size)
    b.output(b.add(b.reshape(y, shape), b.rand((shape[-1],))))
    t = b._check(b._ops[1].inputs[2])
    t.data = np.array([1, 6, 8, 4], np.int32)
    _claims_nothing(b.build(), runtime, ("begin and size", "SLICE", "RESHAPE"), reason)


def _claims_nothing(model: bytes, runtime: str, cpu_words: tuple[str, ...], reason: str) -> None:
    """The delegate (`all`) claims no node of `model`, each decision giving `reason`; where the
    runtime's own prepare refuses the model, its error names one of `cpu_words`. Not invoked: the
    CPU's own kernel would run out of bounds."""
    d = clgpu_delegate.load(partitioning="all")
    it = make_interpreter(model, [d], runtime=runtime, reference=True)
    try:
        it.allocate_tensors()
    except RuntimeError as e:
        assert any(w in str(e) for w in cpu_words), e
    assert not d.delegated_nodes()
    assert all(reason in x["reason"] for x in d.decisions()), d.decisions()


@pytest.mark.parametrize(
    "mode,pads",
    [
        ("REFLECT", [[1, 1], [1, 1], [2, 2], [0, 0]]),
        ("SYMMETRIC", [[0, 0], [7, 0], [0, 0], [0, 0]]),
    ],
)
def test_hostile_mirror_pad_keeps_the_model_on_the_cpu(
    runtime: str, mode: str, pads: list[list[int]]
) -> None:
    """A MIRROR_PAD whose constant paddings reach past its input (REFLECT: more than the extent
    less one; SYMMETRIC: more than the extent; found by the fuzzer, a mutant whose paddings grew
    to 1024 on an axis of 1): tflite_runtime 2.14's kernel mirrors its output's index past its
    input, which with the rest of the model delegated was a segmentation fault where the CPU alone
    got through. LiteRT's kernel refuses it at prepare. The delegate claims nothing. (Not invoked:
    the CPU's own kernel reads out of bounds.)"""
    b = ModelBuilder(seed=12)
    x = b.input("x", (1, 6, 8, 4))
    y = b.mirror_pad(b.add(x, b.rand((4,))), [[0, 0], [1, 1], [2, 2], [0, 0]], mode)
    b.output(b.add(y, b.rand((4,))))
    t = b._check(b._ops[1].inputs[1])
    t.data = np.array(pads, np.int32)
    why = "is a MIRROR_PAD whose paddings leave axis"
    _claims_nothing(b.build(), runtime, ("MIRROR_PAD", "MirrorPad", "padding"), why)


def test_hostile_transpose_keeps_the_model_on_the_cpu(runtime: str) -> None:
    """A TRANSPOSE whose constant perm names an axis twice (found by the fuzzer: one flipped bit
    made [0, 2, 1, 3] into [0, 2, 1, 2]): TFLite's kernel checks each entry's range only and
    strides past its input, which beside the delegate's partitions gave a wrong output with
    ai_edge_litert and a heap corruption with tflite_runtime. The delegate claims nothing. (Not
    invoked: the CPU's own kernel reads out of bounds.)"""
    b = ModelBuilder(seed=13)
    x = b.input("x", (1, 6, 6, 8))
    y = b.transpose(b.add(x, b.rand((8,))), (0, 2, 1, 3))
    b.output(b.relu(y))  # whatever the channels: the repeated axis makes 6 of the input's 8
    t = b._check(b._ops[1].inputs[1])
    t.data = np.array([0, 2, 1, 2], np.int32)
    why = "is a TRANSPOSE whose perm names axis 2 twice"
    _claims_nothing(b.build(), runtime, ("TRANSPOSE", "Transpose", "perm"), why)


@pytest.mark.parametrize("op", ["mirror_pad", "pad"])
def test_int8_pad_whose_output_is_quantized_otherwise_runs_as_the_cpu_does(
    runtime: str, op: str
) -> None:
    """An int8 MIRROR_PAD whose output scale differs from its input's (found by the fuzzer: two
    flipped bits): TFLite's kernel refuses it at prepare, the delegate copied the integers and
    ran a model the CPU refuses. A pad of two quantizations now stays with TFLite: the model
    fails, or runs, as it does without the delegate."""
    b = ModelBuilder(seed=14)
    x = b.quantize(b.input("x", (1, 6, 8, 4)), 0.05, 3)
    pads = [[0, 0], [1, 1], [2, 2], [0, 0]]
    y = b.mirror_pad(x, pads) if op == "mirror_pad" else b.pad(x, pads)
    b.set_quant(y, 0.1, 3)
    b.output(b.dequantize(y))
    model = b.build()
    inputs = [np.random.default_rng(0).standard_normal((1, 6, 8, 4)).astype(np.float32)]
    outcomes = []
    d = clgpu_delegate.load(partitioning="all")
    for delegates in (None, [d]):
        try:
            it = make_interpreter(model, delegates, runtime=runtime, reference=True)
            it.allocate_tensors()
            outcomes.append(run(it, inputs)[0])
        except RuntimeError as e:  # the message up to its figures, which TFLite prints badly
            outcomes.append(str(e).split("Node")[0].split(" (")[0])
    if isinstance(outcomes[0], str):
        assert isinstance(outcomes[1], str) and outcomes[1] == outcomes[0], outcomes
    else:
        np.testing.assert_array_equal(outcomes[1], outcomes[0])
    pad = next(x for x in d.decisions() if x["op_name"] in ("MIRROR_PAD", "PAD"))
    assert not pad["delegated"] and "quantizations differ" in pad["reason"], pad


def test_gather_indices_with_negative_bytes_past_their_shape(runtime: str) -> None:
    """GATHER indices [2, 0, 1] whose buffer holds three more values, one negative (found by the
    fuzzer): LiteRT loads the longer buffer and its kernel refuses every negative value in it at
    invoke; the delegate ran the gather. tflite_runtime refuses the buffer when it loads it."""
    b = ModelBuilder(seed=12)
    x = b.input("x", (1, 6, 8, 4))
    b.output(b.add(b.gather(b.add(x, b.rand((4,))), [2, 0, 1], axis=3), b.rand((3,))))
    t = b._check(b._ops[1].inputs[1])
    t.data = np.array([2, 0, 1, 0, -7, 1], np.int32)  # written whole, its shape stays [3]
    model = b.build()
    outcomes = []
    for delegates in (None, [clgpu_delegate.load(partitioning="all")]):
        try:
            it = make_interpreter(bytearray(model), delegates, runtime=runtime, reference=True)
            it.allocate_tensors()
            it.invoke()
            outcomes.append("ran")
        except (RuntimeError, ValueError) as e:
            outcomes.append(str(e).split("Node")[0])
    assert outcomes[0] != "ran" and outcomes[1] == outcomes[0], outcomes


def _outlier_filter(weight: float) -> bytes:
    """conv 3x3 (RELU: zeros in its output) -> conv 3x3 with one weight `weight` (RELU): where
    that tap reads a positive value the CPU's sum is below zero, else it sums small terms."""
    b = ModelBuilder(seed=12)
    x = b.input("x", (1, 12, 12, 8))
    h = b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,)), activation="RELU")
    f = b.rand((8, 3, 3, 8))
    f[0, 1, 1, 0] = weight
    b.output(b.conv2d(h, f, b.rand((8,)), activation="RELU"))
    return b.build()


@pytest.mark.parametrize("algorithm", ["auto", "winograd", "winograd4", "winograd4_fused"])
def test_a_filter_with_an_outlier_runs_no_winograd(runtime: str, algorithm: str) -> None:
    # Winograd's transforms spread one weight over a tile's products: the outputs the CPU sums
    # from small terms came out as the rounding error of 3e36-sized ones (a fuzzed bit flip).
    from parity import check_parity

    r = check_parity(
        _outlier_filter(-3e36),
        runtime,
        expect_delegated="all",
        profiling=True,
        conv_algorithm=algorithm,
    )
    algos = {k.node: k.algorithm for k in r.delegate.profile().kernels}
    assert algos[1] == "implicit_gemm", algos
    # Weights of ordinary spread keep the algorithm that was asked for.
    if algorithm != "auto":
        r = check_parity(
            _outlier_filter(3.0),
            runtime,
            expect_delegated="all",
            profiling=True,
            conv_algorithm=algorithm,
        )
        algos = {k.node: k.algorithm for k in r.delegate.profile().kernels}
        assert algos[1] == algorithm, algos


@pytest.mark.parametrize("act", ["RELU6", "RELU_N1_TO_1"])
def test_an_activation_bound_past_int32_in_the_output_scale_stays_with_the_cpu(
    act: str, runtime: str
) -> None:
    # TFLite quantizes a fused activation's bounds in the output's scale and fails its prepare
    # when one leaves int32 (a fuzzed scale of a few 1e-12); the delegate would have saturated
    # them and run the model. Now the node is the CPU's, and allocate_tensors fails as it does
    # without the delegate.
    from clgpu_delegate.modelgen import quantize_model
    from clgpu_delegate.modelgen._reader import read_model
    from clgpu_delegate.modelgen.flatbuffer import QuantParams, _Tensor, write_model

    b = ModelBuilder(seed=14)
    x = b.input("x", (1, 6, 6, 4))
    y = b.conv2d(x, b.rand((4, 3, 3, 4)), b.rand((4,)), activation=act)
    b.output(b.conv2d(y, b.rand((4, 1, 1, 4)), b.rand((4,))))
    m = read_model(quantize_model(b.build(), io="int8", seed=14))
    conv_out = m.ops[0].outputs[0]
    tensors = []
    for i, t in enumerate(m.tensors):
        if i == conv_out:
            q = QuantParams((1e-12,), t.quant.zero_point, t.quant.axis)
            t = _Tensor(t.name, t.shape, t.dtype, t.data, quant=q)
        tensors.append(t)
    model = write_model(tensors, m.ops, m.inputs, m.outputs)
    for delegated in (False, True):
        d = clgpu_delegate.load(partitioning="all", cpu_warmup=False) if delegated else None
        it = make_interpreter(model, [d] if d else None, runtime=runtime, reference=True)
        with pytest.raises(RuntimeError, match="no_integer_overflow_from_quantization"):
            it.allocate_tensors()
        if d is not None:
            why = next(x["reason"] for x in d.decisions() if x["node"] == 0)
            assert "overflow int32 in the output's scale" in why, why
