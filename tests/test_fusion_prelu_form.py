"""A PRELU spelled as element-wise ops (fusion/prelu_form.cc) folds as a PRELU node does: into
the convolution or ADD before it with a slope per channel (the prelu pass), into any op that
clamps with one slope (the epilogue pass). litert-torch writes nn.PReLU as
SUB(RELU(x), MUL(MUL(x, -1, RELU), slopes)); MAXIMUM / MINIMUM / NEG spellings are the same
function. Against TFLite's CPU kernels, with the passes on and off; and what is not a PRELU, or
has a value read elsewhere, stays as it is."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from folds import estimated_and_launched, folded_nodes, launches
from parity import ParityResult, check_parity

from clgpu_delegate.modelgen import ModelBuilder

NO_PRELU = "affine,pad,clamp,epilogue,residual,views,squeeze,depthwise,expand"
NO_EPILOGUE = "affine,pad,clamp,residual,views,squeeze,depthwise,prelu,expand"
FORM_OPS = {"RELU", "MUL", "SUB", "ADD", "NEG", "MAXIMUM", "MINIMUM"}
EXACT = {"profiling": True, "expect_delegated": "all", "rtol": 0.0, "atol": 0.0}

Form = Callable[[ModelBuilder, int, np.ndarray], int]


def _litert(b: ModelBuilder, x: int, a: np.ndarray) -> int:
    """litert-torch's nn.PReLU: relu(x) - a * relu(-x)."""
    neg = b.mul(x, np.array(-1.0, np.float32), "RELU")
    return b.sub(b.relu(x), b.mul(neg, a))


def _neg_add(b: ModelBuilder, x: int, a: np.ndarray) -> int:
    """relu(x) + (-a) * relu(neg(x)), the negated part through NEG and RELU."""
    return b.add(b.mul(b.relu(b.neg(x)), np.array(-a, np.float32)), b.relu(x))


def _max_min(b: ModelBuilder, x: int, a: np.ndarray) -> int:
    """max(x, 0) + a * min(x, 0)."""
    zero = np.zeros((1,), np.float32)
    return b.add(b.maximum(x, zero), b.mul(b.minimum(x, zero), a))


def _leaky(b: ModelBuilder, x: int, a: np.ndarray) -> int:
    """max(x, a * x) for slopes in [0, 1)."""
    return b.maximum(x, b.mul(x, a))


def _slopes(c: int, per_channel: bool, lo: float = -0.5, hi: float = 1.5) -> np.ndarray:
    # Negative and positive slopes, so that a wrong channel or sign shows.
    if per_channel:
        return np.linspace(lo, hi, c).astype(np.float32).reshape(1, 1, 1, c)
    return np.array(0.25, np.float32)


def _conv_form(form: Form, a: np.ndarray, *, c: int = 8, k: int = 3, seed: int = 0) -> bytes:
    """x -> conv k x k -> the form -> conv 1x1."""
    b = ModelBuilder(seed=seed)
    x = b.input("x", (1, 9, 9, c))
    h = b.conv2d(x, b.rand((c, k, k, c)), b.rand((c,), 0.3), 1, 1, "SAME")
    h = form(b, h, a)
    b.output(b.conv2d(h, b.rand((6, 1, 1, c)), b.rand((6,), 0.2)))
    return b.build()


def _on_off(model: bytes, runtime: str, off: str, nodes: int, tag: str) -> ParityResult:
    """Parity with the pass on and off; on, the form's `nodes` launched nothing and the
    producer's kernel carries `tag`."""
    kw = {"profiling": True, "expect_delegated": "all"}
    on = check_parity(model, runtime, **kw)
    off_r = check_parity(model, runtime, fuse=off, **kw)
    assert launches(on) == launches(off_r) - nodes, on.delegate.profile().table()
    assert folded_nodes(on, tag) == 1 and folded_nodes(off_r, tag) == 0
    ran = {k.op for k in on.delegate.profile().kernels}
    assert not ran & FORM_OPS, on.delegate.profile().table()
    return on


@pytest.mark.parametrize("k", [1, 3])  # the plain GEMM of a 1x1, the implicit GEMM
def test_litert_torchs_per_channel_prelu_runs_inside_the_convolution(runtime: str, k: int) -> None:
    model = _conv_form(_litert, _slopes(8, True), k=k, seed=k)
    _on_off(model, runtime, NO_PRELU, 4, "+PRELU")


@pytest.mark.parametrize(
    "form,nodes", [(_litert, 4), (_neg_add, 5), (_max_min, 4), (_leaky, 2)]
)
def test_one_slope_in_any_spelling_is_the_convolutions_epilogue(
    runtime: str, form: Form, nodes: int
) -> None:
    a = np.array(0.2 if form is _leaky else -0.3, np.float32)
    model = _conv_form(form, a, seed=nodes)
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    off = check_parity(model, runtime, profiling=True, expect_delegated="all", fuse=NO_EPILOGUE)
    assert launches(r) == launches(off) - nodes, r.delegate.profile().table()
    assert not {k.op for k in r.delegate.profile().kernels} & FORM_OPS


def test_slopes_all_equal_per_channel_are_one_slope(runtime: str) -> None:
    # PyTorch's nn.PReLU(C) as initialised: 0.25 in every channel.
    a = np.full((1, 1, 1, 8), 0.25, np.float32)
    model = _conv_form(_litert, a, seed=3)
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    assert not {k.op for k in r.delegate.profile().kernels} & FORM_OPS


def test_a_residual_adds_form_goes_with_the_add(runtime: str) -> None:
    # conv -> ADD(x) -> form, one slope: the ADD takes the epilogue, the convolution the ADD.
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 9, 9, 8))
    h = b.conv2d(x, b.rand((8, 3, 3, 8)), b.rand((8,), 0.2), 1, 1, "SAME")
    b.output(_litert(b, b.add(h, x), np.array(0.1, np.float32)))
    r = check_parity(b.build(), runtime, profiling=True, expect_delegated="all")
    assert launches(r) == 1, r.delegate.profile().table()


def _stays(model: bytes, runtime: str, ops: set[str]) -> None:
    r = check_parity(model, runtime, profiling=True, expect_delegated="all")
    assert ops <= {k.op for k in r.delegate.profile().kernels}, r.delegate.profile().table()


def test_not_a_prelu_stays(runtime: str) -> None:
    # 2 relu(x) - a relu(-x): its positive side is not x.
    b = ModelBuilder(seed=8)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    neg = b.mul(h, np.array(-1.0, np.float32), "RELU")
    two = b.mul(b.relu(h), np.array(2.0, np.float32))
    b.output(b.sub(two, b.mul(neg, _slopes(8, True))))
    _stays(b.build(), runtime, {"SUB"})


def test_a_nonzero_bound_stays(runtime: str) -> None:
    # max(x, 0.5) + a min(x, 0): not a function of the two parts alone.
    b = ModelBuilder(seed=9)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    low = b.mul(b.minimum(h, np.zeros((1,), np.float32)), np.array(0.3, np.float32))
    b.output(b.add(b.maximum(h, np.full((1,), 0.5, np.float32)), low))
    _stays(b.build(), runtime, {"ADD", "MAXIMUM"})


def test_a_part_read_elsewhere_stays(runtime: str) -> None:
    b = ModelBuilder(seed=10)
    x = b.input("x", (1, 6, 6, 8))
    h = b.conv2d(x, b.rand((8, 1, 1, 8)), b.rand((8,), 0.2))
    pos = b.relu(h)
    neg = b.mul(h, np.array(-1.0, np.float32), "RELU")
    b.output(b.sub(pos, b.mul(neg, _slopes(8, True))))
    b.output(pos)
    _stays(b.build(), runtime, {"SUB"})


def test_the_cost_model_counts_the_folded_form(runtime: str) -> None:
    model = _conv_form(_litert, _slopes(8, True), seed=11)
    counts, launched = estimated_and_launched(model, runtime)
    assert counts and counts[0] == launched


@pytest.mark.parametrize("per_channel", [True, False])
def test_an_int8_models_float_island_folds_into_its_dequantize(
    runtime: str, per_channel: bool
) -> None:
    """litert-torch's int8 models keep the PRELU in float: DEQUANTIZE, the form, QUANTIZE. The
    DEQUANTIZE's kernel applies it (a slope per channel, or one as its epilogue) and stores the
    result quantized (fusion/requantize.cc): one launch, bit for bit with the CPU's float ops."""
    b = ModelBuilder(seed=12)
    x = b.quant_input("x", (1, 7, 9, 12), 0.05, 3)
    y = _litert(b, b.dequantize(x), _slopes(12, per_channel))
    b.output(b.quantize(y, 0.04, -20))
    model = b.build()
    on = check_parity(model, runtime, **EXACT)
    off = check_parity(model, runtime, fuse=NO_PRELU if per_channel else NO_EPILOGUE, **EXACT)
    assert launches(on) == 1 and launches(off) == 6, on.delegate.profile().table()
    assert folded_nodes(on, "+PRELU+QUANTIZE" if per_channel else "dequantize+QUANTIZE") == 1


def test_half_storage_keeps_the_island_in_one_kernel(runtime: str) -> None:
    # The DEQUANTIZE keeps float32 at the quantization boundary; its slopes come in its precision.
    b = ModelBuilder(seed=16)
    x = b.quant_input("x", (1, 6, 10, 8), 0.05, 3)
    b.output(b.quantize(_litert(b, b.dequantize(x), _slopes(8, True)), 0.04, -20))
    r = check_parity(b.build(), runtime, profiling=True, expect_delegated="all", precision="fp16",
                     rtol=0.0, atol=0.0)
    assert launches(r) == 1, r.delegate.profile().table()


@pytest.mark.parametrize("n", [40, 203])  # whole runs of eight, and a scalar tail too
def test_a_clamp_after_a_dequantize_runs_in_its_kernel(runtime: str, n: int) -> None:
    b = ModelBuilder(seed=13)
    x = b.quant_input("x", (1, n, 3), 0.1, -7)
    b.output(b.quantize(b.relu6(b.dequantize(x)), 0.03, -128))
    r = check_parity(b.build(), runtime, **EXACT)
    assert launches(r) == 1, r.delegate.profile().table()


def test_a_float_value_read_elsewhere_keeps_its_quantize(runtime: str) -> None:
    # The residual's float operand: the QUANTIZE's input is written, the QUANTIZE runs.
    b = ModelBuilder(seed=14)
    x = b.quant_input("x", (1, 6, 6, 8), 0.05, 2)
    h = b.relu(b.dequantize(x))
    b.output(b.quantize(h, 0.02, -128))
    b.output(b.add(h, h))
    r = check_parity(b.build(), runtime, **EXACT)
    assert {k.op for k in r.delegate.profile().kernels} >= {"QUANTIZE", "ADD"}


def test_a_quantize_to_another_type_stays(runtime: str) -> None:
    b = ModelBuilder(seed=15)
    x = b.quant_input("x", (1, 6, 6, 8), 0.05, 2)
    b.output(b.quantize(b.relu(b.dequantize(x)), 0.02, 100, dtype="uint8"))
    r = check_parity(b.build(), runtime, **EXACT)
    assert "QUANTIZE" in {k.op for k in r.delegate.profile().kernels}
