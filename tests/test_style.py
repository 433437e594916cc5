"""The configured linters pass: ruff on the Python, clang-format on the C++ (skipped where
the tool is not installed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    out = subprocess.run([ruff, "check", "clgpu_delegate", "bench", "tests"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_clang_format_is_clean() -> None:
    # Debian installs the version the tree is formatted with under its versioned name only.
    tool = shutil.which("clang-format") or shutil.which("clang-format-15")
    if tool is None:
        pytest.skip("clang-format is not installed (apt-get install clang-format-15)")
    files = sorted(str(p) for p in (ROOT / "src_cpp").rglob("*") if p.suffix in (".cc", ".h"))
    out = subprocess.run([tool, "--dry-run", "-Werror", *files], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
