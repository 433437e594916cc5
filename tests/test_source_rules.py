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


def _sources() -> list[Path]:
    files = [p for p in (ROOT / "src_cpp").rglob("*") if p.suffix in {".cc", ".h"}]
    return sorted(files + list((ROOT / "clgpu_delegate").rglob("*.py")))


def test_no_file_over_400_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > 400
    ]
    assert not long, long


# A C++ definition: a line that opens a brace after a parameter list, not a statement's.
_CXX_DEF = re.compile(r"\)\s*(const\s*)?(override\s*)?(noexcept\s*)?(->\s*[\w:<>]+\s*)?\{\s*$")
_CXX_NOT_DEF = re.compile(r"^\s*(if|for|while|switch|else|do|return|case)\b|\[[^\]]*\]\s*\(|=")


def _long_functions(path: Path, limit: int = 100) -> list[str]:
    lines = path.read_text().splitlines()
    found = []
    if path.suffix == ".py":
        for i, line in enumerate(lines):
            m = re.match(r"(\s*)def ", line)
            if not m:
                continue
            j = i + 1
            while j < len(lines) and (
                not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > len(m.group(1))
            ):
                j += 1
            if j - i > limit:
                found.append(f"{path.relative_to(ROOT)}:{i + 1}: {j - i} lines")
        return found
    i = 0
    while i < len(lines):
        line = lines[i].split("//")[0]
        if _CXX_DEF.search(line) and not _CXX_NOT_DEF.search(line.split("(")[0] + "("):
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0:
                    break
                j += 1
            if j - i + 1 > limit:
                found.append(f"{path.relative_to(ROOT)}:{i + 1}: {j - i + 1} lines")
            i = j
        i += 1
    return found


def test_no_function_over_100_lines() -> None:
    """The runtime's spine in functions a reader takes in at once (lambdas count with the
    function holding them)."""
    found = [f for p in _sources() for f in _long_functions(p)]
    assert not found, found


def test_the_function_rule_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"  x += {i};" for i in range(101))
    src = tmp_path / "long.cc"
    src.write_text(f"int F(int x) {{\n{body}\n  return x;\n}}\n")
    global ROOT
    old, ROOT = ROOT, tmp_path  # noqa: PLW0603 - the helper names paths relative to ROOT
    try:
        assert _long_functions(src) == ["long.cc:1: 104 lines"]
    finally:
        ROOT = old


def test_op_is_a_small_interface() -> None:
    """ops/op.h keeps at most 15 virtuals (issue #40): chunking and the fold roles are interfaces
    of their own (ops/chunker.h, ops/fold_roles.h), and a plan's folds are attachments the op
    reads (ops/attachments.h), never undone: no Unfold anywhere."""
    op_h = (ROOT / "src_cpp" / "ops" / "op.h").read_text()
    assert len(re.findall(r"\bvirtual\b", op_h)) <= 15
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "src_cpp").rglob("*"))
        if p.suffix in {".cc", ".h"}
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"Unfold", line)
    ]
    assert not found, found
