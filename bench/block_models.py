"""Chains of identical inverted-residual blocks (1x1 expand, depthwise, 1x1 project, residual
ADD) over a sweep of map sizes, channels and taps, float32 and int8: what decides whether the
block kernels (kernels/inverted_residual*.cl) or the GEMMs should run a block, timed with
bench/ab_options.py's env.* sets, e.g.

    python bench/block_models.py --out DIR
    python bench/ab_options.py --set real --dir DIR --sets \\
        'block:partitioning=all,env.CLGPU_EXPAND_CHAIN=1' \\
        'gemm:partitioning=all,env.CLGPU_IR_BLOCK=0,env.CLGPU_EXPAND_CHAIN=100000' \\
        'two:partitioning=all,env.CLGPU_IR_BLOCK=0,env.CLGPU_EXPAND_CHAIN=1'

(block: the block kernel wherever it plans; gemm: the GEMM's EXPAND_A, one launch a block;
two: the expand in its own launch.) Names: blk_<H>x<W>_ec<EC>_x<expand>_k<KH>x<KW>[_int8].
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clgpu_delegate.modelgen._ptq import quantize_model
from clgpu_delegate.modelgen.builder import ModelBuilder

# (H, W, EC, expand, KH, KW): spectrogram-like maps (W = 1, taps along time) and small images.
SWEEP = [
    (25, 1, 24, 4, 3, 1),
    (25, 1, 48, 4, 3, 1),
    (25, 1, 96, 4, 3, 1),
    (25, 1, 128, 4, 3, 1),
    (13, 1, 40, 3, 9, 1),
    (49, 1, 24, 3, 9, 1),
    (49, 1, 40, 3, 9, 1),
    (49, 1, 64, 3, 9, 1),
    (98, 1, 40, 3, 9, 1),
    (7, 7, 32, 6, 3, 3),
    (7, 7, 64, 6, 3, 3),
    (14, 14, 32, 6, 3, 3),
    (14, 14, 64, 6, 3, 3),
    (28, 28, 32, 6, 3, 3),
    (49, 10, 24, 4, 3, 3),
    (49, 10, 48, 4, 3, 3),
]


def block_chain(h: int, w: int, ec: int, expand: int, kh: int, kw: int, blocks: int = 6) -> bytes:
    """A first 1x1 conv (so that the blocks read an activation), then `blocks` residual
    inverted-residual blocks of RELU6 activations, then the output."""
    b = ModelBuilder(seed=h * 1000 + ec * 10 + kh)
    x = b.input("x", (1, h, w, ec))
    y = b.conv2d(x, b.rand((ec, 1, 1, ec)), b.rand((ec,), 0.2), 1, 1, "SAME", "RELU")
    c = ec * expand
    for _ in range(blocks):
        e = b.conv2d(y, b.rand((c, 1, 1, ec)), b.rand((c,), 0.2), 1, 1, "SAME", "RELU6")
        d = b.depthwise_conv2d(e, b.rand((1, kh, kw, c)), b.rand((c,), 0.2), 1, 1, "SAME", 1,
                               "RELU6")
        p = b.conv2d(d, b.rand((ec, 1, 1, c)), b.rand((ec,), 0.2), 1, 1, "SAME")
        y = b.add(p, y)
    b.output(y)
    return b.build()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kinds", default="float,int8", help="float, int8 or both")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = a.kinds.split(",")
    for h, w, ec, x, kh, kw in SWEEP:
        name = f"blk_{h}x{w}_ec{ec}_x{x}_k{kh}x{kw}"
        model = block_chain(h, w, ec, x, kh, kw)
        if "float" in kinds:
            (out / f"{name}.tflite").write_bytes(model)
        if "int8" in kinds:
            q = quantize_model(model, io="int8", seed=ec, jitter=0.3)
            (out / f"{name}_int8.tflite").write_bytes(q)
    print(f"block_models: {len(SWEEP) * len(kinds)} models in {out}")


if __name__ == "__main__":
    main()
