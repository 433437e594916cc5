"""PyTorch models converted to .tflite by today's converters, with random weights: the public set
issue #41 measures the delegate on (bench/converted_coverage.py), made the way users make theirs.

    python -m venv ~/convenv    # a venv of its own: never the project's, never its tests'
    ~/convenv/bin/pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu
    ~/convenv/bin/pip install ".[convert]"    # litert-torch, onnx2tf and their stack
    ~/convenv/bin/python bench/convert_models.py [--out DIR] [--models a,b] [--converters c,d]
        [--dq a,b | --no-dq] [--timeout S]

Each model is built with random weights (torchvision's `weights=None`, torch seeded; nothing is
downloaded) and converted by
  litert_torch  Google's PyTorch -> LiteRT converter (formerly ai-edge-torch): litert_torch.convert
  onnx2tf       torch.onnx.export, then onnx2tf (ONNX -> TensorFlow -> .tflite; NHWC inputs)
into DIR/<converter>_<model>.tflite; the models named by --dq also as <converter>_<model>_dq.tflite,
each converter's own dynamic-range quantization (int8 weights, float activations): litert-torch's
full_dynamic_recipe (ai-edge-quantizer), onnx2tf's output_dynamic_range_quantized_tflite.

Existing files are kept. Each conversion runs in a subprocess: one the converter refuses (or that
crashes it, or runs past --timeout) is reported on stderr and in DIR/conversion-failures.json,
and the others go on. DIR defaults to ~/.cache/clgpu_delegate/converted-models. bench/model_pack.py
ships the results to a machine without network.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from converted_small import SMALL  # noqa: E402

DEFAULT_DIR = Path("~/.cache/clgpu_delegate/converted-models").expanduser()
CONVERTERS = ("litert_torch", "onnx2tf")
# Dynamic-range variants: a conv net, a depthwise net, a ViT and the encoder (FC-heavy).
DEFAULT_DQ = ("resnet50", "mobilenet_v3_large", "vit_s16", "bert_encoder")
# The sample images onnx2tf reads from the working directory (else it downloads them).
_ONNX2TF_SAMPLES = "calibration_image_sample_data_20x128x128x3_float32.npy"
# The encoder's shape: BERT-small-like, kept modest so conversions finish on a laptop.
BERT = {"vocab": 8192, "seq": 128, "dim": 256, "heads": 4, "layers": 4, "mlp": 1024}


def _torchvision(name: str, size: int) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        import torchvision

        return torchvision.models.get_model(name, weights=None), (torch.randn(1, 3, size, size),)

    return build


def _vit_s16() -> tuple[Any, tuple[Any, ...]]:
    """ViT-Small/16 (12 layers, width 384, 6 heads) with torchvision's VisionTransformer: a ViT
    a quarter of vit_b_16's size, the same ops."""
    import torch
    from torchvision.models.vision_transformer import VisionTransformer

    m = VisionTransformer(
        image_size=224, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384, mlp_dim=1536
    )
    return m, (torch.randn(1, 3, 224, 224),)


def _segmenter(name: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        import torchvision

        class Seg(torch.nn.Module):
            """The segmenter's "out" tensor: converters want tensors, not the dict it returns."""

            def __init__(self) -> None:
                super().__init__()
                self.m = torchvision.models.get_model(name, weights=None, weights_backbone=None)

            def forward(self, x: Any) -> Any:
                return self.m(x)["out"]

        return Seg(), (torch.randn(1, 3, 256, 256),)

    return build


class _Features:
    """A detector's backbone feature extractor without its heads or box postprocess: the feature
    maps as a tuple (converters want tensors, the backbones return an OrderedDict)."""

    @staticmethod
    def wrap(backbone: Any) -> Any:
        import torch

        class Features(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.backbone = backbone

            def forward(self, x: Any) -> Any:
                return tuple(self.backbone(x).values())

        return Features()


def _ssdlite_backbone() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    det = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    return _Features.wrap(det.backbone), (torch.randn(1, 3, 320, 320),)


def _resnet18_fpn() -> tuple[Any, tuple[Any, ...]]:
    """Faster R-CNN's ResNet-FPN backbone (ResNet-18 here): lateral 1x1 convs, nearest 2x
    upsampling and adds, a max-pooled extra level."""
    import torch
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    fpn = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
    return _Features.wrap(fpn), (torch.randn(1, 3, 256, 256),)


def _bert_encoder() -> tuple[Any, tuple[Any, ...]]:
    """A BERT-style encoder written in torch: token + position + segment embeddings, layer norm,
    multi-head self-attention with an additive padding mask, GELU (erf) MLP, post-norm residuals.
    Inputs: token ids and the attention mask (1 keeps a token, 0 masks it), both int32."""
    import torch
    from torch import nn

    c = BERT

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(c["dim"], 3 * c["dim"])
            self.proj = nn.Linear(c["dim"], c["dim"])
            self.ln1 = nn.LayerNorm(c["dim"], eps=1e-12)
            self.fc1 = nn.Linear(c["dim"], c["mlp"])
            self.fc2 = nn.Linear(c["mlp"], c["dim"])
            self.act = nn.GELU()  # the exact (erf) GELU, as BERT's
            self.ln2 = nn.LayerNorm(c["dim"], eps=1e-12)

        def forward(self, x: Any, bias: Any) -> Any:
            b, s, d = x.shape
            h, hd = c["heads"], c["dim"] // c["heads"]
            q, k, v = self.qkv(x).reshape(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) * hd**-0.5 + bias, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = self.ln1(x + self.proj(ctx))
            return self.ln2(x + self.fc2(self.act(self.fc1(x))))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(c["vocab"], c["dim"])
            self.pos = nn.Embedding(c["seq"], c["dim"])
            self.seg = nn.Embedding(2, c["dim"])
            self.ln = nn.LayerNorm(c["dim"], eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(c["layers"]))

        def forward(self, ids: Any, mask: Any) -> Any:
            pos = torch.arange(ids.shape[1], dtype=torch.int32).unsqueeze(0)
            x = self.ln(self.tok(ids) + self.pos(pos) + self.seg(torch.zeros_like(ids)))
            # BERT's extended mask: 0 where attended, a large negative where padded.
            bias = (1.0 - mask.to(x.dtype))[:, None, None, :] * -10000.0
            for layer in self.layers:
                x = layer(x, bias)
            return x

    ids = torch.randint(0, c["vocab"], (1, c["seq"]), dtype=torch.int32)
    mask = torch.ones(1, c["seq"], dtype=torch.int32)
    mask[:, c["seq"] * 3 // 4 :] = 0
    return Encoder(), (ids, mask)


MODELS: dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]] = {
    "resnet18": _torchvision("resnet18", 224),
    "resnet50": _torchvision("resnet50", 224),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small", 224),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large", 224),
    "efficientnet_b0": _torchvision("efficientnet_b0", 224),
    "regnet_y_400mf": _torchvision("regnet_y_400mf", 224),
    "convnext_tiny": _torchvision("convnext_tiny", 224),
    "vit_s16": _vit_s16,
    "lraspp_mobilenet_v3_large": _segmenter("lraspp_mobilenet_v3_large"),
    "ssdlite320_backbone": _ssdlite_backbone,
    "resnet18_fpn": _resnet18_fpn,
    "bert_encoder": _bert_encoder,
}
PUBLIC = tuple(MODELS)
# Beyond the public set: other architectures of the same converters (channel shuffles, fire
# modules, dense blocks, Inception branches, grouped and dilated convolutions, shifted windows),
# to see whether what the public set needed was a general rule (`--models extended`).
EXTENDED = {
    "mobilenet_v2": 224,
    "shufflenet_v2_x1_0": 224,
    "squeezenet1_1": 224,
    "densenet121": 224,
    "googlenet": 224,
    "inception_v3": 299,
    "mnasnet1_0": 224,
    "efficientnet_v2_s": 224,
    "resnext50_32x4d": 224,
    "regnet_x_400mf": 224,
    "swin_t": 224,
    "maxvit_t": 224,
    # Large classifier heads (FCs of 100+ MB), wide blocks, a bigger EfficientNet, Swin V2's cosine
    # attention (L2_NORMALIZATION): bench/results/converted-coverage-more-pocl.md.
    "alexnet": 224,
    "vgg11_bn": 224,
    "wide_resnet50_2": 224,
    "regnet_y_800mf": 224,
    "efficientnet_b3": 300,
    "swin_v2_t": 256,
}
EXTENDED_SEGMENTERS = ("deeplabv3_mobilenet_v3_large", "fcn_resnet50")
MODELS |= {name: _torchvision(name, size) for name, size in EXTENDED.items()}
MODELS |= {name: _segmenter(name) for name in EXTENDED_SEGMENTERS}
# Issue #42's small kinds as PyTorch writes them (`--models small`), named small_*.
MODELS |= {f"small_{name}": build for name, build in SMALL.items()}


def _build(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model.eval(), args


def convert_litert_torch(name: str, variants: list[str]) -> Iterator[tuple[str, bytes]]:
    import litert_torch

    model, args = _build(name)
    for v in variants:
        quant = None
        if v == "dq":
            from litert_torch.generative.quantize import quant_recipes

            quant = quant_recipes.full_dynamic_recipe()  # int8 channel-wise weights
        edge = litert_torch.convert(model, args, quant_config=quant)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.tflite"
            edge.export(str(path))
            yield v, path.read_bytes()


def convert_onnx2tf(name: str, variants: list[str]) -> Iterator[tuple[str, bytes]]:
    """One onnx2tf run writes the float model and, asked for, its dynamic-range version."""
    import numpy as np
    import onnx2tf
    import torch

    model, args = _build(name)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / "m.onnx"
        # The TorchScript exporter at opset 17: what onnx2tf is tested with.
        torch.onnx.export(model, args, str(onnx_path), opset_version=17, dynamo=False)
        out = Path(tmp) / "tf"
        # onnx2tf downloads sample images for its check of 4-D inputs unless the file lies in the
        # working directory: seeded noise instead (no downloads; the check only compares).
        os.chdir(tmp)
        rng = np.random.default_rng(0)
        np.save(_ONNX2TF_SAMPLES, rng.random((20, 128, 128, 3), dtype=np.float32))
        onnx2tf.convert(
            input_onnx_file_path=str(onnx_path),
            output_folder_path=str(out),
            output_dynamic_range_quantized_tflite="dq" in variants,
            # Signature defs: without them onnx2tf refuses RegNet's graph ("convert again with
            # -osd"); the other models' graphs are the same either way.
            output_signaturedefs=True,
            non_verbose=True,
        )
        files = {"fp32": "m_float32.tflite", "dq": "m_dynamic_range_quant.tflite"}
        for v in variants:
            yield v, (out / files[v]).read_bytes()


CONVERT = {"litert_torch": convert_litert_torch, "onnx2tf": convert_onnx2tf}


def _path(out: Path, converter: str, name: str, variant: str) -> Path:
    return out / f"{converter}_{name}{'_dq' if variant == 'dq' else ''}.tflite"


def _one(converter: str, name: str, out: Path, variants: list[str]) -> int:
    """The subprocess: one model's variants, each written atomically as it is done (a killed
    run leaves no partial file)."""
    for v, data in CONVERT[converter](name, variants):
        path = _path(out, converter, name, v)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return 0


def _last_error(text: str) -> str:
    """The line that names the failure in a converter's output (the last exception line)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # onnx2tf colours its messages
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln.split(":")[0] or "Exception" in ln.split(":")[0]]
    return (errors or lines or ["no output"])[-1][:300]


def _run(converter: str, name: str, out: Path, variants: list[str],
         timeout: float) -> dict[str, str | None]:
    """Converts in a subprocess; per variant None on success, else why not."""
    cmd = [sys.executable, __file__, "--one", converter, name, str(out), ",".join(variants)]
    t0 = time.monotonic()
    why = ""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            code = "killed" if r.returncode < 0 else f"exit {r.returncode}"
            why = f"{code}: {_last_error(r.stderr + r.stdout)}"
    except subprocess.TimeoutExpired:
        why = f"timed out after {timeout:.0f} s"
    result: dict[str, str | None] = {}
    for v in variants:
        path = _path(out, converter, name, v)
        path.with_suffix(".part").unlink(missing_ok=True)
        if path.exists():
            print(f"{path}: {path.stat().st_size / 1e6:.1f} MB ({time.monotonic() - t0:.0f} s)",
                  flush=True)
            result[path.name] = None
        else:
            result[path.name] = why or "no file written"
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_DIR))
    ap.add_argument("--models", default="public",
                    help="names, or the sets 'public' (issue #41's), 'extended', 'small' "
                         "(issue #42's kinds), 'all'")
    ap.add_argument("--converters", default=",".join(CONVERTERS))
    ap.add_argument("--dq", default=",".join(DEFAULT_DQ),
                    help="models that also get a dynamic-range (_dq) variant")
    ap.add_argument("--no-dq", action="store_true", help="no _dq variants")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds per model and converter")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # CONVERTER MODEL DIR VARIANTS
    args = ap.parse_args(argv)
    if args.one:
        converter, name, out, variants = args.one
        return _one(converter, name, Path(out), variants.split(","))
    extended = (*EXTENDED, *EXTENDED_SEGMENTERS)
    small = tuple(f"small_{name}" for name in SMALL)
    sets = {"public": PUBLIC, "extended": extended, "small": small, "all": tuple(MODELS)}
    names = [n for m in args.models.split(",") if m for n in sets.get(m, (m,))]
    converters = [c for c in args.converters.split(",") if c]
    dq = set() if args.no_dq else {m for m in args.dq.split(",") if m}
    bad = [m for m in names + sorted(dq) if m not in MODELS]
    bad += [c for c in converters if c not in CONVERT]
    if bad:
        ap.error(f"unknown {', '.join(bad)}; models: {', '.join(MODELS)}; "
                 f"converters: {', '.join(CONVERT)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "conversion-failures.json"
    failures: dict[str, str] = json.loads(log.read_text()) if log.exists() else {}
    for name in names:
        for converter in converters:
            variants = ["fp32", "dq"] if name in dq else ["fp32"]
            done = [v for v in variants if _path(out, converter, name, v).exists()]
            for v in done:
                failures.pop(_path(out, converter, name, v).name, None)
            todo = [v for v in variants if v not in done]
            if not todo:
                continue
            for file, why in _run(converter, name, out, todo, args.timeout).items():
                if why is None:
                    failures.pop(file, None)
                else:
                    failures[file] = why
                    print(f"convert_models: not converted: {file}: {why}", file=sys.stderr,
                          flush=True)
            log.write_text(json.dumps(failures, indent=1, sort_keys=True) + "\n")
    if not failures:
        log.unlink(missing_ok=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
