"""The PyTorch models bench/convert_models.py converts, by name: torchvision's classifiers,
segmenters and detector backbones, a ViT-S/16, a BERT-style encoder (the public set issue #41
measures, `--models extended` beyond it) and issue #42's small kinds (bench/converted_small.py).
Each entry builds the module and its example inputs with random weights; the caller seeds torch."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from converted_small import SMALL  # noqa: E402

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
