#!/usr/bin/env python3
"""Scratch check of the compute kernels in kernels/*.cl against numpy, through pyopencl.

Standalone (not collected by pytest): `.venv/bin/python tests/kernels_pyopencl_check.py [-k NAME]`.
Each kernel runs on odd shapes (sizes that tiles do not divide, stride 2, dilation 2, SAME/VALID
padding, batch 2, channel counts not a multiple of 4) in fp32 storage (max relative error <= 1e-4)
and with -DSTORAGE_HALF on half buffers (<= 1e-2). Prints one summary line per kernel and exits
non-zero when any case fails. Uses kernels/common.cl when it exists, else the fallback block below.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parent.parent
KDIR = ROOT / "kernels"

# Same contract as the lead's kernels/common.cl; used only while that file does not exist.
FALLBACK_COMMON = r"""
#ifdef STORAGE_HALF
#define T half
#define LOADF(p, i) vload_half((i), (p))
#define STOREF(v, p, i) vstore_half((v), (i), (p))
#define LOADF4(p, i4) vload_half4((i4), (p))
#define STOREF4(v, p, i4) vstore_half4((v), (i4), (p))
#else
#define T float
#define LOADF(p, i) ((p)[(i)])
#define STOREF(v, p, i) ((p)[(i)] = (v))
#define LOADF4(p, i4) vload4((i4), (p))
#define STOREF4(v, p, i4) vstore4((v), (i4), (p))
#endif
#define ACTIVATE(x, lo, hi) fmin(fmax((x), (lo)), (hi))
"""

TOL = {False: 1e-4, True: 1e-2}
# The kernels' own #ifndef defaults (the build gets only the overrides, so these get exercised; a
# mismatch shows up as INVALID_WORK_GROUP_SIZE).
GEMM_DEFAULTS = {
    "gemm.cl": {"TILE_M": 128, "TILE_N": 64, "WPT_M": 8, "WPT_N": 4, "SM_WG": 128, "SM_N": 8},
    "conv2d_implicit_gemm.cl": {"TILE_M": 32, "TILE_N": 32, "WPT_M": 4, "WPT_N": 4},
    "conv2d_winograd.cl": {"TILE_M": 128, "TILE_N": 64, "WPT_M": 8, "WPT_N": 4},
}
RNG = np.random.default_rng(1234)


class Ctx:
    def __init__(self, own_common: bool) -> None:
        self.ctx = cl.create_some_context(interactive=False)
        self.queue = cl.CommandQueue(
            self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        common = KDIR / "common.cl"
        self.common = (
            common.read_text() if (common.exists() and not own_common) else FALLBACK_COMMON
        )
        self.common_name = (
            "kernels/common.cl" if (common.exists() and not own_common) else "fallback"
        )
        self._programs: dict[tuple, cl.Program] = {}
        self._kernels: dict[tuple, cl.Kernel] = {}

    def kernel(
        self, fname: str, name: str, half: bool, defines: dict[str, int] | None = None
    ) -> cl.Kernel:
        key = (fname, name, half, tuple(sorted((defines or {}).items())))
        if key not in self._kernels:
            self._kernels[key] = cl.Kernel(self.program(fname, half, defines), name)
        return self._kernels[key]

    def program(self, fname: str, half: bool, defines: dict[str, int] | None = None) -> cl.Program:
        # -I: the GEMM-family files #include "gemm_tiles.cl" (the delegate expands it itself).
        opts = [f"-I{KDIR}", *(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))]
        if half:
            opts.append("-DSTORAGE_HALF")
        key = (fname, tuple(opts))
        if key not in self._programs:
            src = self.common + "\n" + (KDIR / fname).read_text()
            self._programs[key] = cl.Program(self.ctx, src).build(options=opts)
        return self._programs[key]

    def buf(self, a: np.ndarray, half: bool | None = None) -> cl.Buffer:
        """Device copy of a (storage dtype when half is given; float32 bias otherwise)."""
        if half is not None:
            a = a.astype(np.float16 if half else np.float32)
        a = np.ascontiguousarray(a)
        mf = cl.mem_flags
        return cl.Buffer(self.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a)

    def empty(self, n: int, half: bool) -> cl.Buffer:
        return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size=max(1, n) * (2 if half else 4))

    def read(self, b: cl.Buffer, shape, half: bool) -> np.ndarray:
        out = np.empty(shape, np.float16 if half else np.float32)
        cl.enqueue_copy(self.queue, out, b)
        return out.astype(np.float32)

    def run(self, kernel: cl.Kernel, gsize, lsize, *args) -> None:
        kernel(self.queue, gsize, lsize, *args)
        self.queue.finish()


def i32(*xs):
    return [np.int32(x) for x in xs]


def f32(*xs):
    return [np.float32(x) for x in xs]


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def tiles(fname: str, d: dict[str, int]) -> tuple[int, int, int]:
    """(TILE_M, TILE_N, work-group size) of a tiled GEMM kernel built with overrides d."""
    cfg = {**GEMM_DEFAULTS[fname], **d}
    return (
        cfg["TILE_M"],
        cfg["TILE_N"],
        (cfg["TILE_M"] // cfg["WPT_M"]) * (cfg["TILE_N"] // cfg["WPT_N"]),
    )


def rnd(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def storage(a: np.ndarray, half: bool) -> np.ndarray:
    """What the kernel sees after the host writes a into storage of that precision."""
    return a.astype(np.float16).astype(np.float64) if half else a.astype(np.float64)


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    """Max abs error scaled by the reference's max magnitude (robust to values near zero)."""
    scale = max(float(np.abs(ref).max()), 1e-6)
    return float(np.abs(got.astype(np.float64) - ref).max()) / scale


def act_range(kind: str) -> tuple[float, float]:
    return {"none": (-3.4e38, 3.4e38), "relu": (0.0, 3.4e38), "relu6": (0.0, 6.0)}[kind]


# ----------------------------------------------------------------------------------------------
# references


def ref_conv(x, w, b, stride, dil, pads, lo, hi):
    """x NHWC, w OHWI, pads = (top, left, OH, OW); taps past the bottom/right edge read zero."""
    n, h, wd, c = x.shape
    oc, kh, kw, _ = w.shape
    (sh, sw), (dh, dw), (pt, pl, oh, ow) = stride, dil, pads
    ph = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt)
    pw = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - wd - pl)
    xp = np.zeros((n, h + pt + ph, wd + pl + pw, c))
    xp[:, pt : pt + h, pl : pl + wd, :] = x
    out = np.zeros((n, oh, ow, oc))
    for i in range(kh):
        for j in range(kw):
            patch = xp[
                :,
                i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                j * dw : j * dw + (ow - 1) * sw + 1 : sw,
                :,
            ]
            out += np.einsum("nhwc,oc->nhwo", patch, w[:, i, j, :])
    return np.clip(out + b, lo, hi)


def ref_depthwise(x, w, b, mult, stride, dil, pads, lo, hi):
    n, h, wd, c = x.shape
    _, kh, kw, ocn = w.shape
    (sh, sw), (dh, dw), (pt, pl, oh, ow) = stride, dil, pads
    ph = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt)
    pw = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - wd - pl)
    xp = np.zeros((n, h + pt + ph, wd + pl + pw, c))
    xp[:, pt : pt + h, pl : pl + wd, :] = x
    xr = np.repeat(xp, mult, axis=3)  # channel c*mult + m reads input c
    out = np.zeros((n, oh, ow, ocn))
    for i in range(kh):
        for j in range(kw):
            out += (
                xr[
                    :,
                    i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                    j * dw : j * dw + (ow - 1) * sw + 1 : sw,
                    :,
                ]
                * w[0, i, j, :]
            )
    return np.clip(out + b, lo, hi)


def out_size(h, k, s, d, same):
    """TFLite output size and leading pad for SAME / VALID."""
    ek = (k - 1) * d + 1
    if same:
        o = cdiv(h, s)
        total = max(0, (o - 1) * s + ek - h)
        return o, total // 2
    return (h - ek) // s + 1, 0


# ----------------------------------------------------------------------------------------------
# checks: each returns a list of (case description, error, tolerance)


def check_gemm(cx: Ctx, half: bool):
    res = []
    cases = [
        (1, 1, 1, "none"),
        (67, 45, 33, "relu"),
        (64, 64, 64, "none"),
        (130, 70, 100, "relu6"),
        (67, 68, 36, "relu6"),
        (5, 129, 37, "none"),
        (200, 3, 7, "none"),
        (33, 65, 257, "relu"),
    ]
    variants = [
        {},
        {"TILE_M": 32, "TILE_N": 32, "TILE_K": 16, "WPT_M": 4, "WPT_N": 2, "VWN": 1},
        {"TILE_M": 64, "TILE_N": 64, "TILE_K": 8, "WPT_M": 4, "WPT_N": 4},
        {"TILE_M": 128, "TILE_N": 128, "TILE_K": 16, "WPT_M": 8, "WPT_N": 8, "LPAD": 4},
        {"VWM": 1, "VWN": 1, "LPAD": 1},
    ]
    for vi, d in enumerate(variants):
        kern = cx.kernel("gemm.cl", "gemm_nt", half, d)
        tm, tn, wg = tiles("gemm.cl", d)
        for m, n, k, act in cases if vi == 0 else cases[1:5]:
            a, b, bias = rnd(m, k), rnd(n, k), rnd(n)
            lo, hi = act_range(act)
            ref = np.clip(storage(a, half) @ storage(b, half).T + bias, lo, hi)
            cb = cx.empty(m * n, half)
            cx.run(
                kern,
                (cdiv(m, tm) * cdiv(n, tn) * wg,),
                (wg,),
                cx.buf(a, half),
                cx.buf(b, half),
                cx.buf(bias),
                cb,
                *i32(m, n, k),
                *f32(lo, hi),
            )
            res.append(
                (
                    f"gemm_nt v{vi} M={m} N={n} K={k} {act}",
                    rel_err(cx.read(cb, (m, n), half), ref),
                    TOL[half],
                )
            )
    kern = cx.kernel("gemm.cl", "gemm_nt_small_m", half)
    for m, n, k, act in [
        (1, 1000, 1024, "none"),
        (1, 37, 33, "relu"),
        (3, 130, 99, "relu6"),
        (8, 67, 260, "none"),
        (7, 5, 4, "none"),
    ]:
        a, b, bias = rnd(m, k), rnd(n, k), rnd(n)
        lo, hi = act_range(act)
        ref = np.clip(storage(a, half) @ storage(b, half).T + bias, lo, hi)
        cb = cx.empty(m * n, half)
        sm_wg, sm_n = GEMM_DEFAULTS["gemm.cl"]["SM_WG"], GEMM_DEFAULTS["gemm.cl"]["SM_N"]
        cx.run(
            kern,
            (cdiv(n, sm_n) * sm_wg,),
            (sm_wg,),
            cx.buf(a, half),
            cx.buf(b, half),
            cx.buf(bias),
            cb,
            *i32(m, n, k),
            *f32(lo, hi),
        )
        res.append(
            (
                f"gemm_nt_small_m M={m} N={n} K={k} {act}",
                rel_err(cx.read(cb, (m, n), half), ref),
                TOL[half],
            )
        )
    return res


# (batch, H, W, C, OC, KH, KW, stride, dilation, SAME?, activation)
CONV_CASES = [
    (1, 9, 11, 3, 5, 3, 3, (1, 1), (1, 1), True, "relu"),
    (2, 13, 10, 8, 33, 3, 3, (2, 2), (1, 1), True, "none"),
    (1, 12, 15, 5, 7, 5, 5, (1, 1), (2, 2), True, "relu6"),
    (2, 11, 9, 12, 40, 3, 3, (1, 1), (1, 1), False, "none"),
    (1, 17, 16, 4, 6, 7, 7, (2, 2), (1, 1), True, "none"),
    (1, 8, 9, 36, 70, 1, 1, (1, 1), (1, 1), False, "relu"),
    (1, 10, 7, 16, 9, 1, 3, (2, 1), (1, 2), False, "none"),
    (2, 7, 7, 20, 130, 2, 2, (1, 1), (1, 1), True, "none"),
]


def conv_setup(case, half):
    n, h, w, c, oc, kh, kw, (sh, sw), (dh, dw), same, act = case
    oh, pt = out_size(h, kh, sh, dh, same)
    ow, pl = out_size(w, kw, sw, dw, same)
    x, f, b = rnd(n, h, w, c), rnd(oc, kh, kw, c), rnd(oc)
    lo, hi = act_range(act)
    ref = ref_conv(
        storage(x, half), storage(f, half), b, (sh, sw), (dh, dw), (pt, pl, oh, ow), lo, hi
    )
    pad = "SAME" if same else "VALID"
    name = f"N={n} {h}x{w}x{c}->{oc} k{kh}x{kw} s{sh},{sw} d{dh},{dw} {pad} {act}"
    return x, f, b, (oh, ow, pt, pl), (lo, hi), ref, name


def check_conv2d_implicit_gemm(cx: Ctx, half: bool):
    res = []
    for vi, d in enumerate(
        [
            {},
            {"TILE_M": 64, "TILE_N": 64, "TILE_K": 16, "WPT_M": 4, "WPT_N": 4},
            {"TILE_M": 64, "TILE_N": 32, "TILE_K": 8, "WPT_M": 8, "WPT_N": 2, "VWN": 1},
            {"TILE_M": 128, "TILE_N": 64, "TILE_K": 16, "WPT_M": 8, "WPT_N": 8, "LPAD": 4},
            {"VWM": 1, "VWN": 1, "LPAD": 1},
        ]
    ):
        tm, tn, wg = tiles("conv2d_implicit_gemm.cl", d)
        kern = cx.kernel("conv2d_implicit_gemm.cl", "conv2d_implicit_gemm", half, d)
        for case in CONV_CASES if vi == 0 else CONV_CASES[:4] + CONV_CASES[7:]:
            x, f, b, (oh, ow, pt, pl), (lo, hi), ref, name = conv_setup(case, half)
            n, h, w, c, oc, kh, kw, (sh, sw), (dh, dw) = case[:9]
            ob = cx.empty(n * oh * ow * oc, half)
            cx.run(
                kern,
                (cdiv(n * oh * ow, tm) * cdiv(oc, tn) * wg,),
                (wg,),
                cx.buf(x, half),
                cx.buf(f, half),
                cx.buf(b),
                ob,
                *i32(n, h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl),
                *f32(lo, hi),
            )
            res.append(
                (f"v{vi} {name}", rel_err(cx.read(ob, (n, oh, ow, oc), half), ref), TOL[half])
            )
    return res


# (batch, H, W, C, OC, SAME?, activation) for 3x3 stride-1 convolutions
WINOGRAD_CASES = [
    (1, 9, 11, 3, 5, True, "relu"),
    (2, 13, 10, 8, 33, True, "none"),
    (1, 12, 15, 20, 70, False, "relu6"),
    (2, 7, 6, 16, 16, True, "none"),
    (1, 4, 3, 5, 4, False, "none"),
    (1, 19, 23, 65, 67, True, "relu"),
]


def run_winograd(
    cx: Ctx, half: bool, fname: str, prefix: str, tile: int, case, rows_per_pass, tf: bool
):
    """Filter transform once, then passes of rows_per_pass tile rows (None: one pass).

    tf: -DTRANSFORMED_FLOAT (float U/V/Mo buffers).
    """
    n, h, w, c, oc, same, act = case
    npos = (tile + 2) ** 2
    oh, pt = out_size(h, 3, 1, 1, same)
    ow, pl = out_size(w, 3, 1, 1, same)
    x, f, b = rnd(n, h, w, c), rnd(oc, 3, 3, c), rnd(oc)
    lo, hi = act_range(act)
    ref = ref_conv(storage(x, half), storage(f, half), b, (1, 1), (1, 1), (pt, pl, oh, ow), lo, hi)
    th, tw = cdiv(oh, tile), cdiv(ow, tile)
    rows_per_pass = rows_per_pass or th
    d = {"TRANSFORMED_FLOAT": 1} if tf else {}
    th_half = half and not tf  # storage of the transformed buffers
    gemm = cx.kernel("conv2d_winograd.cl", "winograd_gemm", half, d)
    ft = cx.kernel(fname, f"{prefix}_filter_transform", half, d)
    it = cx.kernel(fname, f"{prefix}_input_transform", half, d)
    ot = cx.kernel(fname, f"{prefix}_output_transform", half, d)
    ub = cx.empty(npos * oc * c, th_half)
    cx.run(ft, (cdiv(oc * c, 64) * 64,), (64,), cx.buf(f, half), ub, *i32(c, oc))
    pmax = n * rows_per_pass * tw
    vb, mb = cx.empty(npos * pmax * c, th_half), cx.empty(npos * pmax * oc, th_half)
    xb, bb, ob = cx.buf(x, half), cx.buf(b), cx.empty(n * oh * ow * oc, half)
    for r0 in range(0, th, rows_per_pass):
        rows = min(rows_per_pass, th - r0)
        p = n * rows * tw
        cx.run(
            it, (cdiv(p * c, 64) * 64,), (64,), xb, vb, *i32(n, h, w, c, oh, ow, pt, pl, r0, rows)
        )
        tm, tn, wg = tiles("conv2d_winograd.cl", d)
        cx.run(gemm, (cdiv(p, tm) * cdiv(oc, tn) * wg, npos), (wg, 1), vb, ub, mb, *i32(p, oc, c))
        cx.run(
            ot,
            (cdiv(p * oc, 64) * 64,),
            (64,),
            mb,
            bb,
            ob,
            *i32(n, oh, ow, oc, r0, rows),
            *f32(lo, hi),
        )
    name = (
        f"N={n} {h}x{w}x{c}->{oc} {'SAME' if same else 'VALID'} {act} rows/pass={rows_per_pass}"
        f"{' TRANSFORMED_FLOAT' if tf else ''}"
    )
    return name, rel_err(cx.read(ob, (n, oh, ow, oc), half), ref)


def check_conv2d_winograd(cx: Ctx, half: bool):
    res = []
    for case in WINOGRAD_CASES:
        for rpp in (None, 2):
            for tf in (False, True) if half else (False,):
                name, err = run_winograd(
                    cx, half, "conv2d_winograd.cl", "winograd_f2", 2, case, rpp, tf
                )
                res.append((name, err, TOL[half]))
    return res


def check_conv2d_winograd4(cx: Ctx, half: bool):
    """With half storage F(4x4) is checked with float transformed buffers, as its contract asks;
    half intermediates are run too and their error printed (INFO), not judged."""
    res = []
    for case in WINOGRAD_CASES:
        for rpp in (None, 1):
            name, err = run_winograd(
                cx, half, "conv2d_winograd4.cl", "winograd_f4", 4, case, rpp, half
            )
            res.append((name, err, TOL[half]))
    if half:
        worst = max(
            run_winograd(cx, half, "conv2d_winograd4.cl", "winograd_f4", 4, case, None, False)[1]
            for case in WINOGRAD_CASES
        )
        print(
            f"INFO conv2d_winograd4 fp16 with half U/V/Mo (not judged): worst rel err {worst:.2e}"
        )
    return res


# (batch, H, W, C, depth_mult, KH, KW, stride, dilation, SAME?, activation)
DEPTHWISE_CASES = [
    (1, 9, 11, 8, 1, 3, 3, (1, 1), (1, 1), True, "relu6"),
    (2, 13, 10, 16, 1, 3, 3, (2, 2), (1, 1), True, "none"),
    (1, 12, 15, 3, 1, 3, 3, (1, 1), (1, 1), False, "relu"),
    (1, 10, 9, 6, 2, 5, 5, (1, 1), (2, 2), True, "none"),
    (2, 11, 7, 5, 3, 3, 3, (2, 1), (1, 1), True, "relu"),
    (1, 8, 8, 7, 1, 5, 5, (2, 2), (1, 1), True, "none"),
    (1, 6, 14, 4, 4, 1, 3, (1, 2), (1, 1), False, "none"),
    (1, 15, 13, 12, 1, 7, 7, (1, 1), (1, 1), True, "none"),
]


def check_depthwise_conv2d_fast(cx: Ctx, half: bool):
    res = []
    for d in ({}, {"WPT_W": 1}, {"WPT_W": 3}, {"WPT_W": 4}):
        kern = cx.kernel("depthwise_conv2d_fast.cl", "depthwise_conv2d_fast", half, d)
        wpt = d.get("WPT_W", 2)
        for case in DEPTHWISE_CASES if not d else DEPTHWISE_CASES[:5]:
            n, h, w, c, mult, kh, kw, (sh, sw), (dh, dw), same, act = case
            oh, pt = out_size(h, kh, sh, dh, same)
            ow, pl = out_size(w, kw, sw, dw, same)
            oc = c * mult
            x, f, b = rnd(n, h, w, c), rnd(1, kh, kw, oc), rnd(oc)
            lo, hi = act_range(act)
            ref = ref_depthwise(
                storage(x, half),
                storage(f, half),
                b,
                mult,
                (sh, sw),
                (dh, dw),
                (pt, pl, oh, ow),
                lo,
                hi,
            )
            ob = cx.empty(n * oh * ow * oc, half)
            total = cdiv(oc, 4) * cdiv(ow, wpt) * n * oh
            cx.run(
                kern,
                (cdiv(total, 64) * 64,),
                (64,),
                cx.buf(x, half),
                cx.buf(f, half),
                cx.buf(b),
                ob,
                *i32(n, h, w, c, oh, ow, mult, kh, kw, sh, sw, dh, dw, pt, pl),
                *f32(lo, hi),
            )
            name = (
                f"WPT_W={wpt} N={n} {h}x{w}x{c} m{mult} k{kh}x{kw} s{sh},{sw} d{dh},{dw} "
                f"{'SAME' if same else 'VALID'} {act}"
            )
            res.append((name, rel_err(cx.read(ob, (n, oh, ow, oc), half), ref), TOL[half]))
    return res


def check_transpose_tiled(cx: Ctx, half: bool):
    res = []
    for d in ({}, {"TILE_DIM": 16, "WG_ROWS": 4}, {"TILE_DIM": 32, "WG_ROWS": 8}):
        kern = cx.kernel("transpose_tiled.cl", "transpose_batched_2d", half, d)
        td, wr = d.get("TILE_DIM", 32), d.get("WG_ROWS", 4)
        for batch, rows, cols in [
            (1, 1, 1),
            (2, 33, 65),
            (1, 64, 64),
            (3, 7, 130),
            (2, 1000, 3),
            (1, 5, 1),
        ]:
            x = rnd(batch, rows, cols)
            ob = cx.empty(x.size, half)
            cx.run(
                kern,
                (batch * cdiv(rows, td) * cdiv(cols, td) * td * wr,),
                (td * wr,),
                cx.buf(x, half),
                ob,
                *i32(batch, rows, cols),
            )
            ref = storage(x, half).transpose(0, 2, 1)
            got = cx.read(ob, (batch, cols, rows), half)
            res.append(
                (f"TILE_DIM={td} [{batch}][{rows}][{cols}]", rel_err(got, ref), 0.0)
            )  # exact copy
    return res


# ----------------------------------------------------------------------------------------------
# --bench: GPU-sized shapes, timed with profiling events (no numpy reference; run the checks too)


def timed(cx: Ctx, kernel: cl.Kernel, gsize, lsize, *args, reps: int = 10) -> float:
    """Median kernel time in seconds over reps runs (after one warm-up)."""
    kernel.set_args(*args)
    times = []
    for _ in range(reps + 1):
        ev = cl.enqueue_nd_range_kernel(cx.queue, kernel, gsize, lsize)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-9)
    return float(np.median(times[1:]))


GEMM_VARIANTS = [
    {},
    {"TILE_M": 64, "TILE_N": 64, "WPT_M": 4, "WPT_N": 4},
    {"TILE_M": 128, "TILE_N": 128, "WPT_M": 8, "WPT_N": 8},
    {"TILE_M": 128, "TILE_N": 128, "WPT_M": 8, "WPT_N": 8, "LPAD": 4},
]


def bench(cx: Ctx, half: bool, only: str = "") -> None:
    """Times each kernel family whose name contains only."""
    tag = "fp16" if half else "fp32"
    dt = np.float16 if half else np.float32

    def dev(*shape):
        return cx.buf(RNG.standard_normal(shape).astype(dt))

    lo, hi = act_range("none")

    def want(name: str) -> bool:
        return only in name

    gemm_shapes = [(4096, 4096, 4096), (11160, 512, 512), (2048, 1000, 2048), (196, 768, 768)]
    for m, n, k in gemm_shapes if want("gemm_nt") else []:
        a, b, bias, c = dev(m, k), dev(n, k), cx.buf(np.zeros(n, np.float32)), cx.empty(m * n, half)
        for d in GEMM_VARIANTS:
            kern = cx.kernel("gemm.cl", "gemm_nt", half, d)
            tm, tn, wg = tiles("gemm.cl", d)
            t = timed(
                cx,
                kern,
                (cdiv(m, tm) * cdiv(n, tn) * wg,),
                (wg,),
                a,
                b,
                bias,
                c,
                *i32(m, n, k),
                *f32(lo, hi),
            )
            print(
                f"BENCH {tag} gemm_nt M={m} N={n} K={k} {d or 'default'}: {t * 1e3:.3f} ms, "
                f"{2 * m * n * k / t / 1e12:.2f} TFLOP/s"
            )
    for m, n, k in (
        [(1, 4096, 4096), (8, 4096, 4096), (1, 1000, 1280)] if want("gemm_nt_small_m") else []
    ):
        a, b, bias, c = dev(m, k), dev(n, k), cx.buf(np.zeros(n, np.float32)), cx.empty(m * n, half)
        for d in ({}, {"SM_N": 4}, {"SM_WG": 256, "SM_N": 4}, {"SM_WG": 64, "SM_N": 4}):
            kern = cx.kernel("gemm.cl", "gemm_nt_small_m", half, d)
            cfg = {**GEMM_DEFAULTS["gemm.cl"], **d}
            wg, sn = cfg["SM_WG"], cfg["SM_N"]
            t = timed(
                cx, kern, (cdiv(n, sn) * wg,), (wg,), a, b, bias, c, *i32(m, n, k), *f32(lo, hi)
            )
            print(
                f"BENCH {tag} gemm_nt_small_m M={m} N={n} K={k} {d or 'default'}: "
                f"{t * 1e6:.1f} us, "
                f"{n * k * (2 if half else 4) / t / 1e9:.0f} GB/s of weights"
            )

    conv_variants = [
        {},
        {"TILE_M": 64, "TILE_N": 64},
        {"TILE_M": 128, "TILE_N": 64, "WPT_M": 8, "WPT_N": 4},
        {"TILE_M": 128, "TILE_N": 64, "TILE_K": 8, "WPT_M": 8, "WPT_N": 4},
        {"TILE_M": 128, "TILE_N": 128, "WPT_M": 8, "WPT_N": 8},
        {"TILE_M": 64, "TILE_N": 32, "WPT_M": 4, "WPT_N": 4, "TILE_K": 8},
    ]
    conv_shapes = [
        (1, 90, 124, 512, 512, 3, 1),
        (1, 360, 496, 64, 64, 3, 1),
        (1, 1440, 1984, 4, 32, 3, 1),
        (1, 224, 224, 3, 64, 7, 2),
        (1, 90, 124, 512, 512, 1, 1),
    ]
    for nb, h, w, c, oc, ks, st in (
        conv_shapes if want("conv2d_implicit_gemm conv2d_winograd4") else []
    ):
        oh, pt = out_size(h, ks, st, 1, True)
        ow, pl = out_size(w, ks, st, 1, True)
        x, f, bias, o = (
            dev(nb, h, w, c),
            dev(oc, ks, ks, c),
            cx.buf(np.zeros(oc, np.float32)),
            cx.empty(nb * oh * ow * oc, half),
        )
        flops = 2 * nb * oh * ow * oc * ks * ks * c
        name = f"{nb}x{h}x{w}x{c}->{oc} k{ks} s{st}"
        for d in conv_variants:
            kern = cx.kernel("conv2d_implicit_gemm.cl", "conv2d_implicit_gemm", half, d)
            tm, tn, wg = tiles("conv2d_implicit_gemm.cl", d)
            t = timed(
                cx,
                kern,
                (cdiv(nb * oh * ow, tm) * cdiv(oc, tn) * wg,),
                (wg,),
                x,
                f,
                bias,
                o,
                *i32(nb, h, w, c, oh, ow, oc, ks, ks, st, st, 1, 1, pt, pl),
                *f32(lo, hi),
                reps=5,
            )
            print(
                f"BENCH {tag} conv2d_implicit_gemm {name} {d or 'default'}: {t * 1e3:.3f} ms, "
                f"{flops / t / 1e12:.2f} TFLOP/s"
            )
        if ks != 3 or st != 1:
            continue
        for fname, prefix, tile in (
            ("conv2d_winograd.cl", "winograd_f2", 2),
            ("conv2d_winograd4.cl", "winograd_f4", 4),
        ):
            for gd in (
                {},
                {"TILE_M": 64, "TILE_N": 64, "WPT_M": 4, "WPT_N": 4},
                {"TILE_M": 128, "TILE_N": 64, "TILE_K": 8, "WPT_M": 8, "WPT_N": 4},
                {"TILE_M": 128, "TILE_N": 128, "WPT_M": 8, "WPT_N": 8},
            ):
                tf = {"TRANSFORMED_FLOAT": 1} if (half and tile == 4) else {}
                npos = (tile + 2) ** 2
                th, tw = cdiv(oh, tile), cdiv(ow, tile)
                p = nb * th * tw
                tt_half = half and not tf
                u, v, mo = (
                    cx.empty(npos * oc * c, tt_half),
                    cx.empty(npos * p * c, tt_half),
                    cx.empty(npos * p * oc, tt_half),
                )
                it = cx.kernel(fname, f"{prefix}_input_transform", half, tf)
                ot = cx.kernel(fname, f"{prefix}_output_transform", half, tf)
                gemm = cx.kernel("conv2d_winograd.cl", "winograd_gemm", half, {**gd, **tf})
                tm, tn, wg = tiles("conv2d_winograd.cl", gd)
                t1 = timed(
                    cx,
                    it,
                    (cdiv(p * c, 256) * 256,),
                    (256,),
                    x,
                    v,
                    *i32(nb, h, w, c, oh, ow, pt, pl, 0, th),
                    reps=5,
                )
                t2 = timed(
                    cx,
                    gemm,
                    (cdiv(p, tm) * cdiv(oc, tn) * wg, npos),
                    (wg, 1),
                    v,
                    u,
                    mo,
                    *i32(p, oc, c),
                    reps=5,
                )
                t3 = timed(
                    cx,
                    ot,
                    (cdiv(p * oc, 256) * 256,),
                    (256,),
                    mo,
                    bias,
                    o,
                    *i32(nb, oh, ow, oc, 0, th),
                    *f32(lo, hi),
                    reps=5,
                )
                tot = t1 + t2 + t3
                print(
                    f"BENCH {tag} {prefix} {name} gemm {gd or 'default'}"
                    f"{' TRANSFORMED_FLOAT' if tf else ''}: {tot * 1e3:.3f} ms (in {t1 * 1e3:.3f}, "
                    f"gemm {t2 * 1e3:.3f}, out {t3 * 1e3:.3f}), "
                    f"{flops / tot / 1e12:.2f} direct-equivalent TFLOP/s"
                )

    dw_shapes = [
        (1, 112, 112, 96, 1, 3, 1),
        (1, 56, 56, 144, 1, 3, 2),
        (1, 360, 496, 32, 1, 3, 1),
        (1, 28, 28, 192, 1, 5, 1),
        (1, 112, 112, 30, 1, 3, 1),
    ]
    for nb, h, w, c, mult, ks, st in dw_shapes if want("depthwise_conv2d_fast") else []:
        oh, pt = out_size(h, ks, st, 1, True)
        ow, pl = out_size(w, ks, st, 1, True)
        oc = c * mult
        x, f, bias, o = (
            dev(nb, h, w, c),
            dev(1, ks, ks, oc),
            cx.buf(np.zeros(oc, np.float32)),
            cx.empty(nb * oh * ow * oc, half),
        )
        for d in ({}, {"WPT_W": 1}, {"WPT_W": 4}, {"WPT_W": 8}):
            kern = cx.kernel("depthwise_conv2d_fast.cl", "depthwise_conv2d_fast", half, d)
            total = cdiv(oc, 4) * cdiv(ow, d.get("WPT_W", 2)) * nb * oh
            t = timed(
                cx,
                kern,
                (cdiv(total, 128) * 128,),
                (128,),
                x,
                f,
                bias,
                o,
                *i32(nb, h, w, c, oh, ow, mult, ks, ks, st, st, 1, 1, pt, pl),
                *f32(lo, hi),
            )
            nbytes = (nb * h * w * c + nb * oh * ow * oc) * (2 if half else 4)
            print(
                f"BENCH {tag} depthwise {nb}x{h}x{w}x{c} m{mult} k{ks} s{st} {d or 'default'}: "
                f"{t * 1e6:.1f} us, "
                f"{nbytes / t / 1e9:.0f} GB/s (in + out)"
            )

    tr_shapes = [(1, 360 * 496, 64), (1, 64, 360 * 496), (8, 3136, 256), (1, 1440 * 1984, 4)]
    for batch, rows, cols in tr_shapes if want("transpose_tiled") else []:
        x, o = dev(batch, rows, cols), cx.empty(batch * rows * cols, half)
        for d in ({}, {"TILE_DIM": 32, "WG_ROWS": 8}, {"TILE_DIM": 64, "WG_ROWS": 4}):
            kern = cx.kernel("transpose_tiled.cl", "transpose_batched_2d", half, d)
            td, wr = d.get("TILE_DIM", 32), d.get("WG_ROWS", 4)
            t = timed(
                cx,
                kern,
                (batch * cdiv(rows, td) * cdiv(cols, td) * td * wr,),
                (td * wr,),
                x,
                o,
                *i32(batch, rows, cols),
            )
            print(
                f"BENCH {tag} transpose [{batch}][{rows}][{cols}] {d or 'default'}: "
                f"{t * 1e6:.1f} us, "
                f"{2 * batch * rows * cols * (2 if half else 4) / t / 1e9:.0f} GB/s (read + write)"
            )


CHECKS = {
    "gemm": check_gemm,
    "conv2d_implicit_gemm": check_conv2d_implicit_gemm,
    "conv2d_winograd": check_conv2d_winograd,
    "conv2d_winograd4": check_conv2d_winograd4,
    "depthwise_conv2d_fast": check_depthwise_conv2d_fast,
    "transpose_tiled": check_transpose_tiled,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="run only the checks whose name contains this")
    ap.add_argument(
        "--own-common",
        action="store_true",
        help="ignore kernels/common.cl, use the fallback macros",
    )
    ap.add_argument("-v", action="store_true", help="print every case")
    ap.add_argument(
        "--bench", action="store_true", help="time GPU-sized shapes instead of checking"
    )
    ap.add_argument(
        "--fp", choices=["fp32", "fp16", "both"], default="both", help="storage precisions to run"
    )
    args = ap.parse_args()
    cx = Ctx(args.own_common)
    dev = cx.ctx.devices[0]
    print(f"device: {dev.name} ({dev.platform.name}); common: {cx.common_name}")
    precisions = {"fp32": (False,), "fp16": (True,), "both": (False, True)}[args.fp]
    if args.bench:
        for half in precisions:
            bench(cx, half, args.k)
        return 0
    failed = 0
    t_all = time.time()
    for name, fn in CHECKS.items():
        if args.k not in name:
            continue
        for half in precisions:
            t0 = time.time()
            try:
                res = fn(cx, half)
            except cl.Error as e:  # build or launch failure: report and go on with the next check
                print(f"FAIL {name:24s} {'fp16' if half else 'fp32'}: {e}")
                failed += 1
                continue
            bad = [r for r in res if not (r[1] <= r[2])]
            worst = max(res, key=lambda r: r[1] / r[2] if r[2] else float(r[1] > 0) * 1e30)
            if args.v or bad:
                for r in res:
                    mark = "ok " if r[1] <= r[2] else "BAD"
                    print(f"    {mark} {r[0]}: rel err {r[1]:.2e} (tol {r[2]:.0e})")
            status = "ok  " if not bad else "FAIL"
            print(
                f"{status} {name:24s} {'fp16' if half else 'fp32'}: "
                f"{len(res) - len(bad)}/{len(res)} cases, worst rel err {worst[1]:.2e} "
                f"(tol {worst[2]:.0e}) [{worst[0]}], {time.time() - t0:.1f}s"
            )
            failed += bool(bad)
    verdict = "all checks passed" if not failed else f"{failed} check(s) failed"
    print(f"{verdict} in {time.time() - t_all:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", module="pyopencl")  # PoCL's "loop not unrolled" remarks
    sys.exit(main())
