"""Ships large benchmark models to a machine without network through a small carry limit:
`pack` zeroes every large float (or int8) weight buffer of a .tflite (keeping its mean and
standard deviation in a sidecar) and gzips it; `unpack` refills each such buffer with seeded
normal values of the same mean and deviation. For models with random weights
(bench/keras_models.py) the timings do not change; results from unpacked models say so.

    python bench/model_pack.py pack OUT_DIR model.tflite ...
    python bench/model_pack.py unpack IN_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tflite

MIN_ELEMENTS = 1024  # smaller buffers (biases, shapes, axes) travel as they are
# int8 weights (PTQ models) too: refilled rounded and clipped to [-127, 127] as TFLite's
# symmetric weight quantization leaves them.
_FLOAT = {
    tflite.TensorType.FLOAT32: np.float32,
    tflite.TensorType.FLOAT16: np.float16,
    tflite.TensorType.INT8: np.int8,
}


def _float_buffers(model: Any) -> dict[int, type]:
    """Buffer index -> numpy float type, for the buffers of float tensors."""
    out: dict[int, type] = {}
    for s in range(model.SubgraphsLength()):
        g = model.Subgraphs(s)
        for t in range(g.TensorsLength()):
            tensor = g.Tensors(t)
            if tensor.Type() in _FLOAT and tensor.Buffer() > 0:
                out[tensor.Buffer()] = _FLOAT[tensor.Type()]
    return out


def _raw(data: bytearray, buf: Any) -> np.ndarray | None:
    """A buffer's bytes as a writable view into `data`: inline, or past the flatbuffer at
    (offset, size) as ai-edge-quantizer writes them (litert-torch's quantized models)."""
    if buf.Offset() > 1:  # 0 and 1 mean "no external data" in the schema
        return np.frombuffer(data, np.uint8, buf.Size(), buf.Offset())
    raw = buf.DataAsNumpy()
    return raw if isinstance(raw, np.ndarray) else None


def _views(data: bytearray) -> dict[int, np.ndarray]:
    """Writable float views of the large float buffers of a model held in `data`."""
    model = tflite.Model.GetRootAsModel(data, 0)
    views = {}
    for i, dtype in _float_buffers(model).items():
        raw = _raw(data, model.Buffers(i))
        if raw is not None and raw.size // np.dtype(dtype).itemsize >= MIN_ELEMENTS:
            views[i] = raw.view(dtype)
    return views


def pack(out_dir: Path, models: list[Path]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in models:
        data = bytearray(path.read_bytes())
        stats = {}
        for i, v in _views(data).items():
            x = v.astype(np.float64)
            stats[str(i)] = [float(x.mean()), float(x.std())]
            v[:] = 0
        (out_dir / (path.name + ".gz")).write_bytes(gzip.compress(bytes(data), 6))
        (out_dir / (path.name + ".json")).write_text(json.dumps(stats))
        print(f"{path.name}: {len(stats)} buffers resampled on unpack", flush=True)


def unpack(in_dir: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for gz in sorted(in_dir.glob("*.tflite.gz")):
        name = gz.name[: -len(".gz")]
        stats = json.loads((in_dir / (name + ".json")).read_text())
        data = bytearray(gzip.decompress(gz.read_bytes()))
        rng = np.random.default_rng(0)
        for i, v in _views(data).items():
            mean, std = stats[str(i)]
            x = rng.normal(mean, std, v.size)
            if v.dtype == np.int8:
                x = np.clip(np.rint(x), -127, 127)
            v[:] = x.astype(v.dtype)
        (out_dir / name).write_bytes(bytes(data))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out_dir", type=Path)
    p.add_argument("models", type=Path, nargs="+")
    u = sub.add_parser("unpack")
    u.add_argument("in_dir", type=Path)
    u.add_argument("out_dir", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        pack(args.out_dir, args.models)
    else:
        unpack(args.in_dir, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
