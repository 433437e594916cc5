"""PyTorch models converted to .tflite by today's converters, with random weights: the public set
issue #41 measures the delegate on (bench/converted_coverage.py), made the way users make theirs.

    python -m venv ~/convenv    # a venv of its own: never the project's, never its tests'
    ~/convenv/bin/pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu
    ~/convenv/bin/pip install ".[convert]"    # litert-torch, onnx2tf and their stack
    ~/convenv/bin/python bench/convert_models.py [--out DIR] [--models a,b] [--converters c,d]
        [--dq a,b | --no-dq] [--int8 a,b] [--timeout S]

Each model is built with random weights (torchvision's `weights=None`, torch seeded; nothing is
downloaded) and converted by
  litert_torch  Google's PyTorch -> LiteRT converter (formerly ai-edge-torch): litert_torch.convert
  onnx2tf       torch.onnx.export, then onnx2tf (ONNX -> TensorFlow -> .tflite; NHWC inputs)
into DIR/<converter>_<model>.tflite; the models named by --dq also as <converter>_<model>_dq.tflite,
each converter's own dynamic-range quantization (int8 weights, float activations): litert-torch's
full_dynamic_recipe (ai-edge-quantizer), onnx2tf's output_dynamic_range_quantized_tflite; those
named by --int8 also as <converter>_<model>_int8.tflite, post-training int8 with float inputs and
outputs calibrated on seeded normal samples: PyTorch's PT2E with litert-torch's quantizer
(symmetric, per-channel weights), onnx2tf's output_integer_quantized_tflite.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from converted_zoo import EXTENDED, EXTENDED_SEGMENTERS, MODELS, PUBLIC, SMALL  # noqa: E402

DEFAULT_DIR = Path("~/.cache/clgpu_delegate/converted-models").expanduser()
CONVERTERS = ("litert_torch", "onnx2tf")
# Dynamic-range variants: a conv net, a depthwise net, a ViT and the encoder (FC-heavy).
DEFAULT_DQ = ("resnet50", "mobilenet_v3_large", "vit_s16", "bert_encoder")
# The sample images onnx2tf reads from the working directory (else it downloads them).
_ONNX2TF_SAMPLES = "calibration_image_sample_data_20x128x128x3_float32.npy"
# The variants a converter writes here, by file suffix.
SUFFIX = {"fp32": "", "dq": "_dq", "int8": "_int8"}


def _build(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model.eval(), args


def convert_litert_torch(name: str, variants: list[str]) -> Iterator[tuple[str, bytes]]:
    import litert_torch

    model, args = _build(name)
    for v in variants:
        quant, source = None, model
        if v == "dq":
            from litert_torch.generative.quantize import quant_recipes

            quant = quant_recipes.full_dynamic_recipe()  # int8 channel-wise weights
        elif v == "int8":
            source, quant = _pt2e_int8(model, args)
        edge = litert_torch.convert(source, args, quant_config=quant)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.tflite"
            edge.export(str(path))
            yield v, path.read_bytes()


def _pt2e_int8(model: Any, args: tuple[Any, ...]) -> tuple[Any, Any]:
    """PyTorch's PT2E post-training int8 (litert-torch's quantizer: symmetric, weights per
    channel), calibrated on seeded normal samples of the inputs: the model to convert and its
    quant config."""
    import torch
    from litert_torch.quantize.pt2e_quantizer import (
        PT2EQuantizer,
        get_symmetric_quantization_config,
    )
    from litert_torch.quantize.quant_config import QuantConfig
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = PT2EQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
    prepared = prepare_pt2e(torch.export.export(model, args).module(), quantizer)
    for _ in range(8):
        prepared(*[torch.randn_like(a) if a.is_floating_point() else a for a in args])
    return convert_pt2e(prepared, fold_quantize=False), QuantConfig(pt2e_quantizer=quantizer)


def convert_onnx2tf(name: str, variants: list[str]) -> Iterator[tuple[str, bytes]]:
    """One onnx2tf run writes the float model and, asked for, its dynamic-range version."""
    import numpy as np
    import onnx2tf
    import torch

    model, args = _build(name)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / "m.onnx"
        # The TorchScript exporter at opset 17: what onnx2tf is tested with.
        # Plain input names: onnx2tf renames "onnx::Gemm_0" and then wants the new name for
        # an input's calibration data.
        torch.onnx.export(model, args, str(onnx_path), opset_version=17, dynamo=False,
                          input_names=[f"input_{i}" for i in range(len(args))])
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
            output_integer_quantized_tflite="int8" in variants,
            custom_input_op_name_np_data_path=_calibration(onnx_path, rng) if "int8" in variants
            else None,
            # Signature defs: without them onnx2tf refuses RegNet's graph ("convert again with
            # -osd"); the other models' graphs are the same either way.
            output_signaturedefs=True,
            non_verbose=True,
        )
        # int8: the integer model with float inputs and outputs (QUANTIZE / DEQUANTIZE at its
        # edges), as a spotter's runtime feeds it features.
        files = {"fp32": "m_float32.tflite", "dq": "m_dynamic_range_quant.tflite",
                 "int8": "m_integer_quant.tflite"}
        for v in variants:
            yield v, (out / files[v]).read_bytes()


def _calibration(onnx_path: Path, rng: Any) -> list[list[Any]]:
    """onnx2tf's calibration data for its int8 model: seeded normal samples of each input in
    the layout onnx2tf gives it (channels moved last), one file per input."""
    import numpy as np
    import onnx

    data = []
    for x in onnx.load(str(onnx_path)).graph.input:
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        if len(shape) in (3, 4):
            shape = [shape[0], *shape[2:], shape[1]]
        path = onnx_path.with_name(f"calib_{x.name}.npy")
        np.save(path, rng.standard_normal((20, *shape[1:])).astype(np.float32))
        data.append([x.name, str(path), 0.0, 1.0])
    return data


CONVERT = {"litert_torch": convert_litert_torch, "onnx2tf": convert_onnx2tf}


def _path(out: Path, converter: str, name: str, variant: str) -> Path:
    return out / f"{converter}_{name}{SUFFIX[variant]}.tflite"


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
    ap.add_argument("--int8", default="",
                    help="models that also get each converter's post-training int8 (_int8)")
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
    int8 = [m for m in args.int8.split(",") if m]
    bad = [m for m in names + sorted(dq) + int8 if m not in MODELS]
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
            if name in args.int8.split(","):
                variants.append("int8")
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
