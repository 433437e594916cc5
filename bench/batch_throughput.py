"""Images per second at batch 1, 8 and 32 (issue #43): the delegate with default options on
Keras-converted models (resized with `resize_tensor_input` before `allocate_tensors`) against
PyTorch + cuDNN on torchvision's models of the same names, timed in the same run.

A step is what a synchronous user sees: input in, inference, output out. The delegate, twice:
`set_tensor`, `invoke`, `get_tensor` from a numpy array; and `invoke`, `get_tensor` with the
input already in the interpreter's input tensor (every invoke still uploads it). PyTorch: fp32
with TF32 off, `cudnn.benchmark`, the model captured in a CUDA graph; the step copies the host
input into the graph's input, replays it and copies the output back to the host, once from
pinned host memory (as a DataLoader with pin_memory=True hands batches over) and once from
pageable memory. The ratio pairs like with like: each runtime's input already in its own host
buffer (the input tensor; the pinned tensor), and, in a second ratio, each from an ordinary
array. Each (model, batch) times them in turns of --turn steps, after warm-up, for at least
--min-seconds; medians per step.

    python bench/batch_throughput.py --dir KERAS_DIR [--models resnet50,mobilenet_v2,...]
        [--batches 1,8,32] [--min-seconds 2] [--out bench/results]

KERAS_DIR holds keras_<name>.tflite from bench/keras_models.py (random weights; PyTorch's
models get random weights too). torch and torchvision are optional: without them only the
delegate's column is filled. Writes batch-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, device_info, write_results  # noqa: E402

import clgpu_delegate  # noqa: E402
from clgpu_delegate.runtime import make_interpreter  # noqa: E402

# torchvision's constructor and input size for each Keras model name.
TORCH_MODELS = {
    "resnet50": ("resnet50", 224),
    "mobilenet_v2": ("mobilenet_v2", 224),
    "inception_v3": ("inception_v3", 299),
    "efficientnet_b0": ("efficientnet_b0", 224),
}


def batched_interpreter(model: bytes, batch: int, **options: Any) -> tuple[Any, Any, int, Any]:
    """(delegate, interpreter, input index, input) with axis 0 of the first input resized to
    `batch` and seeded N(0, 1) values set."""
    d = clgpu_delegate.load(**options)
    it = make_interpreter(model, [d])
    det = it.get_input_details()[0]
    it.resize_tensor_input(det["index"], [batch, *det["shape"][1:]])
    it.allocate_tensors()
    d.wait_ready()
    x = np.random.default_rng(0).standard_normal([batch, *det["shape"][1:]]).astype(np.float32)
    it.set_tensor(det["index"], x)
    return d, it, det["index"], x


def delegate_steps(
    model: bytes, batch: int, **options: Any
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Two steps on one interpreter: from a numpy array (`set_tensor` copies it into the
    interpreter's input tensor, then `invoke` uploads that), and from the input tensor itself,
    written once before (as a producer that decodes into `interpreter.tensor(i)()` leaves it;
    the invoke still uploads it every time, as PyTorch's pinned step copies its pinned tensor)."""
    d, it, index, x = batched_interpreter(model, batch, **options)
    out = it.get_output_details()[0]["index"]

    def from_array() -> Any:
        it.set_tensor(index, x)
        it.invoke()
        return it.get_tensor(out)

    def in_place() -> Any:
        it.invoke()
        return it.get_tensor(out)

    from_array.keep = in_place.keep = (d, it)  # type: ignore[attr-defined]
    return from_array, in_place


def torch_step(name: str, batch: int, pinned: bool) -> Callable[[], Any] | None:
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    ctor, size = TORCH_MODELS[name]
    kwargs = {"aux_logits": True, "init_weights": True} if name == "inception_v3" else {}
    m = getattr(torchvision.models, ctor)(weights=None, **kwargs).eval().cuda()
    host = torch.randn(batch, 3, size, size)
    if pinned:  # as a DataLoader with pin_memory=True hands batches over
        host = host.pin_memory()
    static_in = torch.empty(batch, 3, size, size, device="cuda")
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the default stream, as graph capture wants
            for _ in range(3):
                static_in.copy_(host)
                m(static_in)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = m(static_in)

    def step() -> Any:
        static_in.copy_(host, non_blocking=pinned)
        graph.replay()
        return static_out.cpu()

    step.keep = (m, graph)  # type: ignore[attr-defined]
    return step


def time_turns(steps: dict[str, Callable[[], Any]], turn: int, min_seconds: float) -> dict:
    times: dict[str, list[float]] = {k: [] for k in steps}
    for f in steps.values():
        for _ in range(3):
            f()
    end = time.perf_counter() + min_seconds
    while time.perf_counter() < end or min(len(v) for v in times.values()) < 10:
        for k, f in steps.items():
            f()  # untimed: the other's work drains first
            for _ in range(turn):
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="folder of keras_<name>.tflite")
    ap.add_argument("--models", default=",".join(TORCH_MODELS))
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--turn", type=int, default=5, help="steps per turn")
    ap.add_argument("--min-seconds", type=float, default=2.0, help="per model and batch")
    ap.add_argument(
        "--precision", default="fp32", help="the delegate's; fp16 writes batch-fp16-<device>"
    )
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    rows = []
    torch_version = ""
    for name in args.models.split(","):
        model = (Path(args.dir).expanduser() / f"keras_{name}.tflite").read_bytes()
        for b in (int(x) for x in args.batches.split(",")):
            from_array, in_place = delegate_steps(model, b, precision=args.precision)
            steps = {"clgpu": from_array, "clgpu_in_place": in_place}
            for key, pinned in (("torch_pinned", True), ("torch_pageable", False)):
                t = torch_step(name, b, pinned)
                if t is not None:
                    import torch

                    torch_version = torch.__version__
                    steps[key] = t
            med = time_turns(steps, args.turn, args.min_seconds)
            row: dict[str, Any] = {
                "model": name,
                "batch": b,
                "clgpu_img_s": b / med["clgpu_in_place"],
                "clgpu_set_tensor_img_s": b / med["clgpu"],
            }
            if "torch_pinned" in med:
                row["torch_pinned_img_s"] = b / med["torch_pinned"]
                row["torch_pageable_img_s"] = b / med["torch_pageable"]
                row["torch_img_s"] = max(row["torch_pinned_img_s"], row["torch_pageable_img_s"])
                # Like for like: each input already in its runtime's own host buffer (the
                # interpreter's input tensor; a pinned tensor), and each from an ordinary array.
                row["ratio"] = row["clgpu_img_s"] / row["torch_pinned_img_s"]
                row["ratio_from_array"] = (
                    row["clgpu_set_tensor_img_s"] / row["torch_pageable_img_s"]
                )
            rows.append(row)
            print(row, flush=True)
            del steps
    meta = {
        **device_info(),
        "torch": torch_version or "not installed",
        "precision": args.precision,
        "min_seconds": args.min_seconds,
        "turn": args.turn,
    }
    base = write_results(
        "batch" if args.precision == "fp32" else f"batch-{args.precision}",
        meta,
        rows,
        [("model", "model"), ("batch", "batch"),
         ("clgpu_img_s", "clgpu img/s, input in its tensor"),
         ("torch_pinned_img_s", "torch img/s, pinned input"), ("ratio", "clgpu / torch"),
         ("clgpu_set_tensor_img_s", "clgpu img/s, set_tensor"),
         ("torch_pageable_img_s", "torch img/s, pageable input"),
         ("ratio_from_array", "clgpu / torch, from arrays")],
        Path(args.out),
    )
    print(base.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
