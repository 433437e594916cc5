"""Where the float inverted-residual block kernel (kernels/inverted_residual.cl) spends its time on
a small map: the kernel alone, built with pyopencl outside the delegate, on one block's shapes,
checked against numpy, and timed three ways per variant:

- event_us: the median of its profiling events' end - start;
- stream_us: wall time per launch of a stream of launches (no profiling);
- stages: with --stamps, the SM cycles (PTX %clock64, NVIDIA only) between the barriers, taken
  by work-item 0 of each group (median over groups): loads, expand, depthwise, project, ... per
  pass, then the final sums.

    pip install pyopencl    # an optional extra of this script only
    python bench/irb_probe.py [--shapes H,W,EC,C,OC,KH,KW,SH;...] [--stamps] [--runs 300]
        [--tag NAME] [--out bench/results]

Variants: `two-pass` (at most 4 expands per work-item, the plan before
the block kernel's one-pass change), `one-pass` (every expanded channel in one pass), and
`one-pass-vec-held` (one pass, float4 staging and expand, the project's weights held in
registers: the plan PlanBlock makes where the channels are multiples of 4). Writes
irb-probe[-TAG]-<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import write_results  # noqa: E402

WG = 256


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def plan(shape: tuple[int, ...], variant: str) -> dict[str, Any]:
    """Chunk, lanes and defines of one variant (rows of 1, as PlanBlock picks on small maps)."""
    h, w, ec, c, oc, kh, kw, sh = shape
    in_pixels, outputs = kh * w, w * oc
    lanes, cap = 1, min(32, max(1, (c + 3) // 4))
    while lanes * 2 <= cap and outputs * lanes * 2 <= WG * 8:
        lanes *= 2
    vec = variant == "one-pass-vec-held" and ec % 4 == 0 and c % 4 == 0
    wstride = ec + (4 if (ec // 4) % 2 == 0 else 0) if vec else ec + 1
    per_channel = wstride + kh * kw + 2 + in_pixels + w
    budget = 44 * 1024 // 4 - 3
    ypt = 4 if variant == "two-pass" else 8
    chunk = min(c, (budget - in_pixels * ec) // per_channel, WG * ypt // in_pixels)
    if chunk < c:
        chunk -= chunk % 4
        if variant != "two-pass":  # passes of equal width, as PlanBlock makes them
            chunk = min(chunk, ceil_div(ceil_div(c, ceil_div(c, chunk)), 4) * 4)
    defines = ""
    if variant != "two-pass":
        opt = ceil_div(outputs * lanes, WG)
        defines = f"-DIRB_OPT={opt} -DIRB_YPT={ceil_div(in_pixels * chunk, WG)}"
        if vec:
            held = min(ceil_div(chunk, 4 * lanes), 12 // opt)
            defines += f" -DIRB_VEC -DIRB_PWI={held}"
    local = max(in_pixels * ec + per_channel * chunk, outputs * lanes) + 3
    return {"chunk": chunk, "lanes": lanes, "passes": ceil_div(c, chunk), "defines": defines,
            "local_floats": local}


def source(stamps: bool) -> str:
    common = (ROOT / "kernels/common.cl").read_text()
    body = (ROOT / "kernels/inverted_residual.cl").read_text()
    if not stamps:
        return common + "\n" + body
    # A stamp at the start, after each barrier and at the end; the stamp buffer takes the place
    # of OVERFLOW_PARAM (empty under float storage).
    pre = r"""
#undef OVERFLOW_PARAM
#define OVERFLOW_PARAM , __global ulong* stamps
inline ulong clk64(void) { ulong t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }
#define STAMP() do { if (get_local_id(0) == 0 && stamp_i < 32) \
  stamps[get_group_id(0) * 32 + stamp_i] = clk64(); ++stamp_i; } while (0)
"""
    body = body.replace("barrier(CLK_LOCAL_MEM_FENCE);", "barrier(CLK_LOCAL_MEM_FENCE); STAMP();")
    body = body.replace("const int lid = get_local_id(0);",
                        "const int lid = get_local_id(0); int stamp_i = 0; STAMP();", 1)
    body = re.sub(r"\n}\s*$", "\nSTAMP();\n}\n", body)
    return common + pre + body


def reference(x, exf, exb, dwf, dwb, pwf, pb, res, shape):
    h, w, ec, c, oc, kh, kw, sh = shape
    oh, pt, pl = ceil_div(h, sh), pads(shape)[0], (kw - 1) // 2
    y = np.clip(x.reshape(-1, ec) @ exf.T + exb, 0, 6).reshape(1, h, w, c)
    yp = np.zeros((1, h + kh + sh * oh, w + kw, c), np.float32)
    yp[:, pt:pt + h, pl:pl + w] = y
    z = np.zeros((1, oh, w, c), np.float32)
    for i in range(kh):
        for j in range(kw):
            z += yp[:, i:i + sh * oh:sh, j:j + w] * dwf[i, j]
    z = np.clip(z + dwb, 0, 6)
    return z.reshape(-1, c) @ pwf.T + pb + res.reshape(-1, oc)


def pads(shape: tuple[int, ...]) -> tuple[int, int]:
    h, w, ec, c, oc, kh, kw, sh = shape
    oh = ceil_div(h, sh)
    return max((oh - 1) * sh + kh - h, 0) // 2, (kw - 1) // 2


def probe(cl: Any, ctx: Any, shape: tuple[int, ...], variant: str, stamps: bool,
          runs: int) -> dict[str, Any]:
    h, w, ec, c, oc, kh, kw, sh = shape
    oh = ceil_div(h, sh)
    p = plan(shape, variant)
    opts = f"-cl-std=CL1.2 -DDW_KH={kh} -DDW_KW={kw} -DHAS_RESIDUAL -DPACKED {p['defines']}"
    kern = cl.Program(ctx, source(stamps)).build(options=opts).inverted_residual_block
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, h, w, ec)).astype(np.float32)
    parts = [(rng.standard_normal((c, ec)) * 0.2).astype(np.float32),
             rng.standard_normal(c).astype(np.float32),
             (rng.standard_normal((kh, kw, c)) * 0.3).astype(np.float32),
             rng.standard_normal(c).astype(np.float32),
             (rng.standard_normal((oc, c)) * 0.1).astype(np.float32),
             rng.standard_normal(oc).astype(np.float32)]
    res = rng.standard_normal((1, oh, w, oc)).astype(np.float32)
    offsets, blob = [], b""
    for v in parts:  # one constant buffer, as the delegate packs them
        blob += b"\0" * ((-len(blob)) % 256)
        offsets.append(len(blob))
        blob += v.tobytes()
    mf = cl.mem_flags
    buf = lambda a: cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)  # noqa: E731
    out = cl.Buffer(ctx, mf.READ_WRITE, res.nbytes)
    groups = oh
    st = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(groups * 32, np.uint64))
    i32, f32 = np.int32, np.float32
    ints = [1, h, w, ec, c, oh, w, oc, sh, 1, 1, 1, pads(shape)[0], pads(shape)[1], 1,
            p["chunk"], p["lanes"]]
    args = [buf(x), *map(i32, offsets), out, cl.LocalMemory(p["local_floats"] * 4),
            *map(i32, ints), f32(0), f32(6), f32(0), f32(6), f32(-np.inf), f32(np.inf), buf(res),
            buf(np.frombuffer(blob, np.uint8).copy())]
    kern.set_args(*(args + [st] if stamps else args))
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    plain = cl.CommandQueue(ctx)
    gsz, lsz = (groups * WG,), (WG,)
    cl.enqueue_nd_range_kernel(q, kern, gsz, lsz).wait()
    got = np.empty_like(res)
    cl.enqueue_copy(q, got, out).wait()
    ref = reference(x, *parts, res, shape)
    err = float(np.abs(got.reshape(ref.shape) - ref).max() / np.abs(ref).max())
    events = [cl.enqueue_nd_range_kernel(q, kern, gsz, lsz) for _ in range(runs)]
    q.finish()
    row = dict(shape=",".join(map(str, shape)), variant=variant, chunk=p["chunk"],
               lanes=p["lanes"], passes=p["passes"], rel_err=err,
               event_us=float(np.median([(e.profile.end - e.profile.start) * 1e-3
                                         for e in events])))
    cl.enqueue_nd_range_kernel(plain, kern, gsz, lsz)
    plain.finish()
    t0 = time.perf_counter()
    for _ in range(runs):
        cl.enqueue_nd_range_kernel(plain, kern, gsz, lsz)
    plain.finish()
    row["stream_us"] = (time.perf_counter() - t0) / runs * 1e6
    if stamps:
        s = np.empty(groups * 32, np.uint64)
        cl.enqueue_copy(q, s, st).wait()
        s = s.reshape(groups, 32).astype(np.int64)
        n = int(np.argmax(s[0] == 0)) if (s[0] == 0).any() else 32
        row["stage_cycles"] = " ".join(str(int(v)) for v in np.median(np.diff(s[:, :n]), axis=0))
        row["total_cycles"] = int(np.median(s[:, n - 1] - s[:, 0]))
    if err > 1e-4:
        raise SystemExit(f"{variant} on {shape}: relative error {err:.2e} against numpy")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="49,1,40,120,40,9,1,1;59,1,32,96,32,9,1,1;"
                    "25,1,48,144,48,9,1,1", help="H,W,EC,C,OC,KH,KW,SH;...")
    ap.add_argument("--variants", default="two-pass,one-pass,one-pass-vec-held")
    ap.add_argument("--stamps", action="store_true", help="stage cycles (NVIDIA's PTX)")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args()
    import pyopencl as cl

    ctx = cl.create_some_context(interactive=False)
    dev = ctx.devices[0]
    rows = []
    for text in a.shapes.split(";"):
        shape = tuple(int(v) for v in text.split(","))
        for variant in a.variants.split(","):
            rows.append(probe(cl, ctx, shape, variant, a.stamps, a.runs))
            print(rows[-1], flush=True)
    meta = {"device": dev.name.strip(), "driver": dev.driver_version, "runs": a.runs}
    cols = [("shape", "H,W,EC,C,OC,KH,KW,SH"), ("variant", "variant"), ("chunk", "chunk"),
            ("passes", "passes"), ("lanes", "lanes"), ("event_us", "event us"),
            ("stream_us", "stream us per launch")]
    if a.stamps:
        cols += [("total_cycles", "cycles in the kernel"), ("stage_cycles", "cycles per stage")]
    stem = "irb-probe" + (f"-{a.tag}" if a.tag else "")
    print("wrote", write_results(stem, meta, rows, cols, Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
