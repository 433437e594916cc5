"""The pyopencl context the checks build kernels/*.cl in, small helpers, and the numpy
references of the convolutions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parent.parent.parent
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
    "gemm.cl": {"TILE_M": 128, "TILE_N": 64, "WPT_M": 8, "WPT_N": 4},
    "gemm_small_m.cl": {"SM_WG": 128, "SM_N": 8},
    "conv2d_implicit_gemm.cl": {"TILE_M": 32, "TILE_N": 32, "WPT_M": 4, "WPT_N": 4},
    "winograd_gemm.cl": {"TILE_M": 128, "TILE_N": 64, "WPT_M": 8, "WPT_N": 4},
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


def igemm_prm(cx, geometry, lo: float, hi: float) -> cl.Buffer:
    """conv2d_implicit_gemm.cl's `prm` (unpacked: no offsets): the geometry N, H, W, C, OH, OW,
    OC, KH, KW, SH, SW, DH, DW, PT, PL at 8, k_per_split 0, the clamp's bits at 24 and 25."""
    prm = np.zeros(36, np.int32)
    prm[8:23] = geometry
    prm[24:26] = np.array([lo, hi], np.float32).view(np.int32)
    return cx.buf(prm)


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
