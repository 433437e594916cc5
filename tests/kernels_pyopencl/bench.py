"""--bench: GPU-sized shapes, timed with profiling events (no numpy reference; run the checks
too)."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from .common import (
    GEMM_DEFAULTS,
    RNG,
    Ctx,
    act_range,
    cdiv,
    f32,
    i32,
    igemm_prm,
    out_size,
    tiles,
)


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
            kern = cx.kernel("gemm_small_m.cl", "gemm_nt_small_m", half, d)
            cfg = {**GEMM_DEFAULTS["gemm_small_m.cl"], **d}
            wg, sn = cfg["SM_WG"], cfg["SM_N"]
            t = timed(
                cx,
                kern,
                (cdiv(n, sn) * wg,),
                (wg,),
                *(a, b, bias, c),
                *i32(m, n, k),
                *f32(lo, hi, 100.0),  # b_max: above the random weights
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
                o,
                igemm_prm(cx, (nb, h, w, c, oh, ow, oc, ks, ks, st, st, 1, 1, pt, pl), lo, hi),
                f,
                bias,
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
                gemm = cx.kernel("winograd_gemm.cl", "winograd_gemm", half, {**gd, **tf})
                tm, tn, wg = tiles("winograd_gemm.cl", gd)
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
