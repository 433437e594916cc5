"""The source tree's structure: src_cpp's layers include only downwards (.ci/check_layers.py,
which CI runs too), and op codes live with their ops."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / ".ci" / "check_layers.py"


def check(src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), str(src)], capture_output=True, text=True, timeout=60
    )


def test_the_tree_includes_only_downwards() -> None:
    r = check(ROOT / "src_cpp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 upward include(s)" in r.stdout


def test_a_planted_upward_include_fails(tmp_path: Path) -> None:
    src = tmp_path / "src_cpp"
    shutil.copytree(ROOT / "src_cpp", src)
    victim = src / "ops" / "binary.cc"
    lines = victim.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith('#include "ops/op.h"'))
    lines.insert(at + 1, '#include "runtime/partition.h"\n')
    victim.write_text("".join(lines))
    r = check(src)
    assert r.returncode == 1
    assert f"binary.cc:{at + 2}:" in r.stdout
    assert "ops/ may not include runtime/" in r.stdout
    assert "1 upward include(s)" in r.stdout


def test_op_codes_live_in_ops_and_tflite() -> None:
    # fusion/'s passes recognise the patterns they fold by op code, as ops/ does.
    # Outside ops/, fusion/ and tflite/ only the structural codes: DEQUANTIZE (folded weights),
    # DELEGATE (our kernels' registration) and CUSTOM (the warm-up's CPU fallback tells an
    # unresolved custom op), plus activation and padding enums.
    allowed = {"kDequantize", "kDelegate", "kCustom", "kMaxParamDims"}
    found = []
    for path in sorted((ROOT / "src_cpp").rglob("*.[hc]*")):
        if path.relative_to(ROOT / "src_cpp").parts[0] in {"ops", "fusion", "tflite"}:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for code in re.findall(r"tfl::(k[A-Z]\w*)", line):
                if code not in allowed and not code.startswith(("kAct", "kPadding")):
                    found.append(f"{path.name}:{n}: {code}")
    assert not found, found
