"""Constant buffers packed into one (ops/op_helpers.h's PackBuffers, kernels/gemm_int8.cl's and
conv2d_implicit_gemm.cl's PACKED): an int8 GEMM launch with its depthwise, expand, residual and
table folded in, or a float implicit GEMM with its depthwise, expand, residual or affine, takes
its weights, biases, stages and integers from one buffer where they are small (the integers from
a buffer either way: the launch's `prm`). Against TFLite with packing on and off
($CLGPU_PACK_CONSTS=0), split K included, and the packed launches create one buffer more each
(stats), so that packing is seen to happen."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity
from parity import check_parity
from test_fusion_affine import _bn_conv
from test_fusion_expand import block
from test_fusion_squeeze import head_model

import clgpu_delegate
from clgpu_delegate.modelgen import quantize_model


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 20, 1, 12), {"k": 3, "kw": 1, "residual": True}),  # a keyword spotter's block
        ((1, 9, 7, 8), {"stride": 2}),
        # A small map. Its expand fold must pay (fusion/expand.cc's ExpandFoldPays: its repeated
        # products within a budget of the device's nominal arithmetic): expand 6 crossed it on a
        # 2-core PoCL device at 2.4 GHz, 4 leaves a third of it.
        ((1, 4, 4, 16), {"expand": 4, "residual": True}),
    ],
)
def test_packed_and_unpacked_constants_agree_with_the_cpu(
    runtime: str, shape: tuple[int, int, int, int], kw: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = quantize_model(block(shape, seed=shape[1], **kw), io="int8", seed=shape[1])
    # The device's buffers are counted per OpenCL environment, which delegates of one device
    # share while one of them lives: `keep` holds it, so that each run's count is a difference.
    keep = clgpu_delegate.load()
    made = {}
    for pack in ("0", "1"):
        monkeypatch.setenv("CLGPU_PACK_CONSTS", pack)
        before = keep.stats().buffers_created
        r = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True)
        assert any("+EXPAND" in k.algorithm for k in r.delegate.profile().kernels)
        made[pack] = keep.stats().buffers_created - before
    # The int8 GEMM launches (the first conv, the block) packed: a buffer more for each prepare.
    assert made["1"] > made["0"], made


def test_bad_pack_knob_is_a_clear_error(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = quantize_model(block((1, 6, 6, 8), seed=1), io="int8", seed=1)
    monkeypatch.setenv("CLGPU_PACK_CONSTS", "2")
    with pytest.raises(Exception, match="CLGPU_PACK_CONSTS"):
        check_int8_parity(model, runtime)


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((1, 20, 1, 12), {"k": 3, "kw": 1, "residual": True}),
        ((1, 9, 7, 8), {"stride": 2}),
    ],
)
def test_float_block_kernel_packed_and_unpacked(
    runtime: str, shape: tuple[int, int, int, int], kw: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The float inverted-residual block kernel (kernels/inverted_residual.cl) packs its six.
    model = block(shape, seed=shape[1] + 1, **kw)
    keep = clgpu_delegate.load()
    made = {}
    for pack in ("0", "1"):
        monkeypatch.setenv("CLGPU_PACK_CONSTS", pack)
        before = keep.stats().buffers_created
        r = check_parity(model, runtime, expect_delegated="all", profiling=True)
        assert any(
            k.algorithm.startswith("inverted_residual") for k in r.delegate.profile().kernels
        )
        made[pack] = keep.stats().buffers_created - before
    assert made["1"] > made["0"], made


# Every fold pass but the squeeze tail's (option `fuse`).
NO_TAIL = (
    "affine,pad,clamp,epilogue,residual,views,squeeze,gate,ds_chain,depthwise,prelu,requantize,"
    "expand,pool,gathers,concat"
)

@pytest.mark.parametrize("quantize", [True, False])
def test_squeeze_packed_and_unpacked(
    runtime: str, quantize: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A classifier's head in one squeeze: pool, FULLY_CONNECTED and SOFTMAX (kernels/squeeze_*.cl).
    model = head_model((1, 25, 1, 64), (12,), pool="VALID", quantize=quantize, seed=4)
    keep = clgpu_delegate.load()
    made = {}
    for pack in ("0", "1"):
        monkeypatch.setenv("CLGPU_PACK_CONSTS", pack)
        before = keep.stats().buffers_created
        if quantize:
            # The squeeze's own kernel: not folded into the convolution before it.
            r = check_int8_parity(model, runtime, min_fraction=1.0, profiling=True, fuse=NO_TAIL)
        else:
            r = check_parity(model, runtime, expect_delegated="all", profiling=True)
        assert any("squeeze" in k.algorithm for k in r.delegate.profile().kernels)
        made[pack] = keep.stats().buffers_created - before
    assert made["1"] > made["0"], made


@pytest.mark.parametrize(
    "model,options",
    [
        # a keyword spotter's block in one GEMM (expand, depthwise, residual), whole and split
        (lambda: block((1, 20, 1, 12), k=3, kw=1, residual=True, seed=5), {"gemm_splits": 1}),
        (lambda: block((1, 6, 6, 8), expand=6, residual=True, seed=6), {"gemm_splits": 3}),
        # strided
        (lambda: block((1, 9, 7, 8), stride=2, seed=7), {"gemm_splits": 2}),
        # batch normalization read by a 3x3 convolution (the affine fold), whole and split
        (lambda: _bn_conv((1, 9, 9, 8), mul="none", add="RELU", seed=8), {"gemm_splits": 1}),
        (lambda: _bn_conv((1, 10, 12, 8), stride=2, seed=9), {"gemm_splits": 2}),
    ],
)
def test_float_implicit_gemm_packed_and_unpacked(
    runtime: str, model, options: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The block kernel off, so that the implicit GEMM runs the fused block.
    monkeypatch.setenv("CLGPU_IR_BLOCK", "0")
    m = model()
    keep = clgpu_delegate.load()
    made = {}
    for pack in ("0", "1"):
        monkeypatch.setenv("CLGPU_PACK_CONSTS", pack)
        before = keep.stats().buffers_created
        r = check_parity(m, runtime, expect_delegated="all", profiling=True, **options)
        kernels = r.delegate.profile().kernels
        assert any(k.algorithm.startswith("implicit_gemm+") for k in kernels), kernels
        made[pack] = keep.stats().buffers_created - before
    assert made["1"] > made["0"], made
