"""Rules of the C++ sources that a reviewer would otherwise keep by hand: where device classes
are decided, and how op codes are named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (ROOT / "src_cpp").is_dir(), reason="not in the checkout")


def _violations(pattern: re.Pattern[str], allowed: set[str]) -> list[str]:
    found = []
    for path in sorted((ROOT / "src_cpp").rglob("*.[ch]*")):
        rel = path.relative_to(ROOT / "src_cpp").as_posix()
        if rel in allowed:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line.split("//")[0]):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_device_class_check_outside_the_profile() -> None:
    # Vendor strings and device types are read in cl/device_profile.cc (and the device listing
    # and selection of cl/device.cc); every other file reads the profile's fields.
    pattern = re.compile(r'nvidia\(\)|[!=]=\s*"(gpu|cpu)"|"(gpu|cpu)"\s*[!=]=|"NVIDIA')
    found = _violations(pattern, {"cl/device_profile.cc", "cl/device.cc", "cl/device.h"})
    assert not found, "\n".join(found)


def test_op_codes_are_named_through_the_enum() -> None:
    # tflite/builtin.h's BuiltinOp names every code the delegate handles: no handler or
    # comparison spells one as a bare number.
    pattern = re.compile(
        r"OpHandler k\w+Handler = \{\s*\d|\bop\)?\s*[!=]=\s*\d+\b|\{\s*\d+\s*,\s*\"[A-Z_0-9]+\""
    )
    found = _violations(pattern, {"tflite/builtin.h"})
    assert not found, "\n".join(found)


def test_no_file_keeps_its_own_op_code_constants() -> None:
    # A local `constexpr int32_t kMul = 18;` is a second spelling of the enum's name.
    header = (ROOT / "src_cpp" / "tflite" / "builtin.h").read_text()
    block = header[header.index("enum BuiltinOp") :]
    names = re.findall(r"\n  (k\w+) = \d+,", block[: block.index("};")])
    pattern = re.compile(r"constexpr\s+int32_t\s+(" + "|".join(names) + r")\s*=")
    found = _violations(pattern, {"tflite/builtin.h"})
    assert not found, "\n".join(found)
