"""The checks: each kernel family on odd shapes against numpy, in fp32 or half storage."""

from __future__ import annotations

import numpy as np

from .common import (
    GEMM_DEFAULTS,
    TOL,
    Ctx,
    act_range,
    cdiv,
    f32,
    i32,
    igemm_prm,
    out_size,
    ref_conv,
    ref_depthwise,
    rel_err,
    rnd,
    storage,
    tiles,
)

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
    kern = cx.kernel("gemm_small_m.cl", "gemm_nt_small_m", half)
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
        sm = GEMM_DEFAULTS["gemm_small_m.cl"]
        sm_wg, sm_n = sm["SM_WG"], sm["SM_N"]
        cx.run(
            kern,
            (cdiv(n, sm_n) * sm_wg,),
            (sm_wg,),
            cx.buf(a, half),
            cx.buf(b, half),
            cx.buf(bias),
            cb,
            *i32(m, n, k),
            *f32(lo, hi, float(np.abs(b).max())),  # b_max: the overflow guard's bound
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
                ob,
                igemm_prm(cx, (n, h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl), lo, hi),
                cx.buf(f, half),
                cx.buf(b),
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
    gemm = cx.kernel("winograd_gemm.cl", "winograd_gemm", half, d)
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
        tm, tn, wg = tiles("winograd_gemm.cl", d)
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


CHECKS = {
    "gemm": check_gemm,
    "conv2d_implicit_gemm": check_conv2d_implicit_gemm,
    "conv2d_winograd": check_conv2d_winograd,
    "conv2d_winograd4": check_conv2d_winograd4,
    "depthwise_conv2d_fast": check_depthwise_conv2d_fast,
    "transpose_tiled": check_transpose_tiled,
}
